"""``deliver`` on ``POST /v1/agents/{id}/messages``: the reply of the run that consumes the message goes to an adapter.

The target is checked before anything is stored (unknown adapter or account, a disabled
account: 422 naming the field). It is then stored with the message, as an inbound chat
message's is (``metadata.deliver_to``), and the message accepted through the broker, which hands
the run that consumes it (also the running turn it is steered into) to the server's
:class:`~nexus.streaming.Deliverer`: the reply streams to the adapter and the delivery is
recorded with the turn (``deliveries`` in the turn views). The 202 does not wait for the run or
the adapter. The stored target survives a restart: a message still queued when the server
stops is run, and its reply delivered, by the next broker.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

from nexus.server._errors import ApiError

if TYPE_CHECKING:
    from nexus.adapters import DeliveryTarget
    from nexus.broker import AgentMessage, SendReceipt
    from nexus.server._state import ServerState


class DeliverTo(BaseModel):
    """Where the reply goes: an account of an adapter in ``nexus.toml`` and the platform's address."""

    model_config = ConfigDict(extra="forbid")
    adapter: str = Field(min_length=1, max_length=100, description="the adapter's name ([adapters.NAME] in nexus.toml)")
    account: str = Field(min_length=1, max_length=100, description="one of the adapter's accounts (enabled)")
    to: str = Field(min_length=1, max_length=500, description="the platform's address, e.g. chat:12345")
    thread_id: str | None = Field(default=None, min_length=1, max_length=200, description="a thread to reply in")
    reply_to_id: str | None = Field(
        default=None, min_length=1, max_length=200, description="the message the first block replies to"
    )


DELIVER_DESCRIPTION = (
    "stream the reply of the run that consumes this message to a chat adapter: "
    "{adapter, account, to, thread_id?, reply_to_id?} or 'NAME/ACCOUNT:TARGET' as for nexus send --deliver"
)


def delivery_target(state: ServerState, deliver: DeliverTo | str) -> DeliveryTarget:
    """The checked target of a request's ``deliver`` (422 naming the field, 409 without a broker here)."""
    from nexus.adapters import DeliveryTarget
    from nexus.streaming import DeliveryTargetError, parse_target

    if state.broker is None:
        raise ApiError(409, "no_broker", "deliver needs the broker to run in this server process (nexus serve)")
    if state.deliverer is None:  # `nexus serve` with no [adapters]: it was a 409 saying "needs nexus serve"
        name = deliver.split("/", 1)[0] if isinstance(deliver, str) else deliver.adapter
        raise ApiError(422, "invalid_request", f"deliver: no adapter named {name!r}: this server has no [adapters] "
                                               "configured (docs/adapters.md)")  # fmt: skip
    try:
        if isinstance(deliver, str):
            target = parse_target(deliver)
        else:
            target = DeliveryTarget(
                deliver.adapter, deliver.account, deliver.to, deliver.thread_id, deliver.reply_to_id
            )
        return state.deliverer.check(target, prefix="deliver.")
    except DeliveryTargetError as exc:
        message = str(exc).replace("--deliver ", "deliver: ", 1)
        raise ApiError(422, "invalid_request", message) from None


async def send_and_deliver(
    state: ServerState, message: AgentMessage, mode: str | None, target: DeliveryTarget
) -> tuple[SendReceipt, dict[str, Any] | None]:
    """Accept ``message`` through the broker with ``target`` as its reply target (delivered in the background)."""
    assert state.broker is not None and state.deliverer is not None  # checked by delivery_target
    message.deliver_reply(target)  # durable, like inbound's: the broker delivers the run that takes it
    receipt = await state.broker.send(message, mode)
    if receipt.duplicate:  # the first acceptance stands, and so does its delivery
        return receipt, None
    return receipt, target.to_json()
