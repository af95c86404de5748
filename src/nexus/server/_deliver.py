"""``deliver`` on ``POST /v1/agents/{id}/messages``: the reply of the run that consumes the message goes to an adapter.

The target is checked before anything is stored (unknown adapter or account, a disabled
account: 422 naming the field). The message is then accepted through the broker's
``execute`` and its execution handed to the server's :class:`~nexus.broker.delivery.Deliverer`,
which streams the reply to the adapter and records the delivery with the turn
(``deliveries`` in the turn views). The 202 does not wait for the run or the adapter.

The target is also stored with the message, as an inbound chat message's is
(``metadata.deliver_to``), so it survives a restart: a message still queued when the server
stops is run by the next broker, whose runner hook (the inbound router's) delivers its reply
there. The stored target names the process that delivers it live (``owner``): in that process
the hook leaves the run to the live delivery (:func:`skip_live_deliveries`), so nothing is
delivered twice; any later process delivers it.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

from nexus.broker.delivery import OWNER_KEY, keep_reply_target
from nexus.server._errors import ApiError

if TYPE_CHECKING:
    from nexus.adapters.types import DeliveryTarget
    from nexus.broker import AgentMessage, SendReceipt
    from nexus.broker.engine_runner import EngineRunHandle
    from nexus.broker.inbound import ReplyDelivery
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
    from nexus.adapters.types import DeliveryTarget
    from nexus.streaming.targets import DeliveryTargetError, parse_target

    if state.broker is None or state.deliverer is None:
        raise ApiError(409, "no_broker", "deliver needs the broker to run in this server process (nexus serve)")
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
    """Accept ``message`` through the broker and deliver its run's reply to ``target`` in the background."""
    assert state.broker is not None and state.deliverer is not None  # checked by delivery_target
    keep_reply_target(message, target, state.delivery_owner)  # durable, like inbound's
    execution = await state.broker.execute(message, mode, target=target, commit_now=True)
    if execution.receipt.duplicate:  # the first acceptance stands, and so does its delivery
        return execution.receipt, None
    state.deliverer.start(execution, target)
    return execution.receipt, target.to_json()


def skip_live_deliveries(deliver: ReplyDelivery, owner: str) -> ReplyDelivery:
    """``deliver`` for the runs of stored reply targets, except those process ``owner`` delivers live.

    The live delivery follows the message's own execution (also into a run it was steered into);
    the stored target is for the process that finds the message queued after a restart.
    """

    async def nothing() -> None:
        return None

    def filtered(run: EngineRunHandle, target: DeliveryTarget) -> Awaitable[object]:
        stored = run.request.deliver_to or {}
        return nothing() if stored.get(OWNER_KEY) == owner else deliver(run, target)

    return filtered
