"""Sessions of the evaluation set: authentication and caching work (two families of confusable topics)."""

from __future__ import annotations

from spec import E, Fork, Sess, T

SESSIONS = [
    Sess(
        "shop-login-throttle",
        "web",
        "shop-web",
        41,
        [
            E(
                "login rate limit",
                [
                    T(
                        "Add rate limiting to the login endpoint: at most 5 attempts per IP per minute",
                        "Added a sliding-window limiter in auth/ratelimit.py and wired it into POST /login; over the limit it "
                        "answers 429 with Retry-After.",
                        reads="auth/views.py",
                        writes="auth/ratelimit.py auth/views.py",
                    ),
                    T(
                        "The limiter should key on the username as well, not only the IP address",
                        "The window key is now (ip, username); an attacker rotating IPs against one account is throttled.",
                        writes="auth/ratelimit.py tests/test_ratelimit.py",
                    ),
                ],
                [
                    "Keep going on the brute-force protection for sign-in: the 429 reply needs a JSON body with the wait time",
                    "add a test that the per-account login throttle resets once the minute window has passed",
                ],
            ),
            E(
                "lockout email",
                [
                    T(
                        "When an account is throttled 3 times in an hour, lock it and email the owner",
                        "Added account lockout (auth/lockout.py) and a 'suspicious sign-in attempts' email template.",
                        reads="auth/ratelimit.py",
                        writes="auth/lockout.py templates/email/lockout.html",
                    ),
                ],
                [
                    "the locked-account notification email should include the IP addresses that tried to get in",
                    "after an account gets locked out, how does the owner unlock it? add an unlock link to that mail",
                ],
            ),
        ],
    ),
    Sess(
        "mobile-token-refresh",
        "mobile",
        "mobile-app",
        33,
        [
            E(
                "refresh race",
                [
                    T(
                        "Users get logged out randomly on the app: two requests refresh the JWT at the same time",
                        "Found the race: both 401 handlers call /token/refresh and the second one invalidates the first "
                        "refresh token. Added a single-flight refresh promise in src/api/tokenRefresher.ts.",
                        reads="src/api/client.ts",
                        writes="src/api/tokenRefresher.ts src/api/client.ts",
                    ),
                    T(
                        "Queue the requests that failed with 401 and replay them after the refresh finishes",
                        "401s now wait on the in-flight refresh and are retried once with the new access token.",
                        writes="src/api/client.ts src/api/__tests__/client.test.ts",
                    ),
                ],
                [
                    "the app still signs people out now and then; keep working on replaying the queued calls after the token renew",
                    "write a jest test for two parallel 401 responses sharing one access-token refresh in the mobile client",
                ],
            ),
            E(
                "biometric unlock",
                [
                    T(
                        "Add Face ID / fingerprint unlock that reads the refresh token from the keychain",
                        "Added src/auth/biometric.ts using react-native-keychain with biometry access control.",
                        writes="src/auth/biometric.ts src/screens/Unlock.tsx",
                    ),
                ],
                [
                    "on Android the fingerprint prompt shows twice when the app comes back from the background; fix the biometric unlock",
                    "let users turn off face id unlock in settings and fall back to the PIN screen",
                ],
            ),
        ],
    ),
    Sess(
        "admin-sso",
        "web",
        "admin-portal",
        27,
        [
            E(
                "oidc login",
                [
                    T(
                        "Admins should log into the portal with our Okta tenant through OpenID Connect",
                        "Added an OIDC authorization-code flow with PKCE (portal/auth/oidc.py), callback route and session cookie.",
                        reads="portal/settings.py",
                        writes="portal/auth/oidc.py portal/urls.py",
                    ),
                    T(
                        "The callback fails with 'state mismatch' behind the load balancer",
                        "The state cookie was SameSite=Strict and dropped on the cross-site redirect; now Lax, and the state "
                        "is also checked against the server-side session.",
                        writes="portal/auth/oidc.py portal/settings.py",
                    ),
                ],
                [
                    "okta sign-in for the admin console: handle the case when the id_token is expired by the time the callback runs",
                    "continue the OpenID Connect work on the portal and add logout that also ends the Okta session",
                ],
            ),
            E(
                "group roles",
                [
                    T(
                        "Map Okta groups to portal roles: admins, support, read-only",
                        "Roles come from the 'groups' claim; mapping table in portal/auth/roles.py, unknown groups get read-only.",
                        writes="portal/auth/roles.py portal/auth/oidc.py",
                    ),
                ],
                [
                    "support staff should not see billing pages; extend the group to role mapping with a billing-admin role",
                    "the groups claim can be missing for some okta users; make role assignment robust to that",
                ],
            ),
        ],
    ),
    Sess(
        "shop-password-reset",
        "web",
        "shop-web",
        19,
        [
            E(
                "reset token expiry",
                [
                    T(
                        "Password reset links never expire. Make them single-use and valid for 30 minutes",
                        "Reset tokens are now HMAC-signed with a timestamp and stored hashed; used tokens are rejected.",
                        reads="auth/reset.py",
                        writes="auth/reset.py auth/models.py migrations/0042_reset_token.py",
                    ),
                ],
                [
                    "the forgot-password link should stop working after it has been used once; check the single-use part again",
                    "expire password recovery tokens after 30 min and add tests for an old link",
                ],
            ),
            E(
                "reset email template",
                [
                    T(
                        "Make the password reset email look like our other transactional mails",
                        "Rewrote templates/email/reset.html on the shared base layout with a button and plain-text part.",
                        writes="templates/email/reset.html templates/email/reset.txt",
                    ),
                ],
                [
                    "the reset-password email renders badly in Outlook; fix the button in that template",
                ],
            ),
        ],
    ),
    Sess(
        "admin-2fa",
        "web",
        "admin-portal",
        14,
        [
            E(
                "totp enrollment",
                [
                    T(
                        "Add two-factor authentication with TOTP apps for portal admins",
                        "Added portal/auth/totp.py (pyotp), an enrollment page with a QR code, and verification at login.",
                        writes="portal/auth/totp.py portal/templates/enroll_2fa.html",
                    ),
                    T(
                        "Generate ten one-time recovery codes at enrollment",
                        "Recovery codes are generated, shown once, stored as argon2 hashes, and each works once.",
                        writes="portal/auth/recovery.py portal/auth/totp.py",
                    ),
                ],
                [
                    "admins should be able to regenerate their authenticator recovery codes from the security page",
                    "the TOTP enrollment QR code is too small on retina screens, continue the authenticator app setup",
                ],
            ),
        ],
        forks=[
            Fork(
                0,
                "admin-2fa-webauthn",
                [
                    E(
                        "webauthn keys",
                        [
                            T(
                                "Instead of SMS as the fallback, let admins register a hardware security key with WebAuthn",
                                "Added portal/auth/webauthn.py (py_webauthn): registration and assertion ceremonies, credentials table.",
                                writes="portal/auth/webauthn.py portal/models.py",
                            ),
                            T(
                                "Allow more than one security key per admin and name them",
                                "Credentials now have a label; the settings page lists keys and lets an admin revoke one.",
                                writes="portal/auth/webauthn.py portal/templates/security_keys.html",
                            ),
                        ],
                        [
                            "continue the hardware key second factor: yubikey registration fails on Firefox with a timeout",
                            "admins want to rename a registered security key after the fact; keep going on the webauthn branch",
                        ],
                    ),
                ],
                parent_tasks=[],
            ),
            Fork(
                0,
                "admin-2fa-sms",
                [
                    E(
                        "sms fallback",
                        [
                            T(
                                "Add SMS codes through Twilio as the fallback second factor when the TOTP app is lost",
                                "Added portal/auth/sms.py sending 6-digit codes via Twilio Verify, rate limited to 3 per 10 minutes.",
                                writes="portal/auth/sms.py portal/settings.py",
                            ),
                        ],
                        [
                            "the twilio text-message fallback for 2fa should not send more than three codes in ten minutes, double check that and add a test",
                            "some admins have no phone number on file; handle that in the SMS second-factor fallback",
                        ],
                    ),
                ],
            ),
        ],
    ),
    Sess(
        "catalog-cache",
        "backend",
        "shop-api",
        36,
        [
            E(
                "cache design",
                [
                    T(
                        "Product catalog pages are slow; cache the product detail lookups",
                        "Profiled: 80% of time is in get_product() hitting Postgres. Proposed a read-through cache in "
                        "catalog/cache.py keyed by product id and locale.",
                        reads="catalog/service.py catalog/repo.py",
                    ),
                ],
                [],
            ),
            E(
                "lru in process",
                [
                    T(
                        "Implement it as an in-process LRU with a 5 minute TTL",
                        "Added catalog/cache.py with a TTL'd LRU (maxsize 10k) around get_product(); hit rate 92% in the load test.",
                        writes="catalog/cache.py catalog/service.py",
                    ),
                    T(
                        "Invalidate the LRU entry when a product is edited in the admin",
                        "The admin save hook now evicts the product's keys for every locale.",
                        writes="catalog/cache.py admin/hooks.py",
                    ),
                ],
                [
                    "product details still show the old title after an edit for some locales; keep working on the in-memory cache eviction",
                    "tune the per-process LRU for products: the 10k max size uses too much memory on the small workers",
                ],
            ),
        ],
        forks=[
            Fork(
                0,
                "catalog-cache-redis",
                [
                    E(
                        "redis cache",
                        [
                            T(
                                "Try Redis instead of a per-process cache so all workers share it",
                                "Added catalog/redis_cache.py with GET/SETEX, msgpack values, a 300 s TTL and a circuit breaker "
                                "when Redis is down.",
                                writes="catalog/redis_cache.py catalog/service.py settings/redis.py",
                            ),
                            T(
                                "Avoid a stampede when a hot product expires",
                                "Added probabilistic early refresh and a short Redis lock so one worker recomputes a hot key.",
                                writes="catalog/redis_cache.py",
                            ),
                        ],
                        [
                            "continue the shared redis cache for product lookups: the circuit breaker never closes again after redis comes back",
                            "measure how much the early-refresh trick reduces the thundering herd on popular items in the redis version",
                        ],
                    ),
                ],
            ),
        ],
    ),
    Sess(
        "cdn-etags",
        "backend",
        "shop-web",
        24,
        [
            E(
                "static caching headers",
                [
                    T(
                        "Our JS and CSS bundles are re-downloaded on every visit; set proper cache headers",
                        "Hashed filenames are now served with Cache-Control: public, max-age=31536000, immutable; index.html "
                        "with no-cache.",
                        reads="nginx/site.conf",
                        writes="nginx/site.conf build/webpack.config.js",
                    ),
                    T(
                        "Add ETags for the API responses of the product list",
                        "Added a weak ETag middleware (api/etag.py) hashing the JSON body; 304 when If-None-Match matches.",
                        writes="api/etag.py api/app.py",
                    ),
                ],
                [
                    "the product list endpoint should answer 304 Not Modified more often; continue with the etag middleware",
                    "browser caching of API responses: compute the entity tag without serializing the body twice",
                ],
            ),
        ],
    ),
    Sess(
        "report-memo",
        "data",
        "analytics",
        21,
        [
            E(
                "memoize reports",
                [
                    T(
                        "The monthly revenue report recomputes the same aggregates for every chart",
                        "Wrapped the aggregate queries in a memoizer keyed by (report, month, filters) in reports/memo.py.",
                        reads="reports/revenue.py",
                        writes="reports/memo.py reports/revenue.py",
                    ),
                ],
                [
                    "revenue dashboard charts each rerun the monthly aggregation; continue the memoization of report queries",
                    "the memo key for the revenue report ignores the currency filter, so it returns wrong totals",
                ],
            ),
            E(
                "warm cache nightly",
                [
                    T(
                        "Precompute last month's report at night so the first visitor is not slow",
                        "Added a nightly job (jobs/warm_reports.py) that fills the memo for the last 2 months.",
                        writes="jobs/warm_reports.py deploy/cron.yaml",
                    ),
                ],
                [
                    "the nightly job that prewarms the analytics reports runs before the data load finishes; move it later",
                ],
            ),
        ],
    ),
    Sess(
        "price-invalidation",
        "backend",
        "shop-api",
        9,
        [
            E(
                "pubsub invalidation",
                [
                    T(
                        "When prices change in the pricing service, caches in other services keep old prices",
                        "Pricing now publishes price.changed events on NATS; consumers evict keys (pricing/events.py, "
                        "catalog/subscribers.py).",
                        writes="pricing/events.py catalog/subscribers.py",
                    ),
                    T(
                        "Make the subscriber idempotent and survive a NATS reconnect",
                        "Events carry a version; subscriber ignores older versions and resubscribes with durable consumers.",
                        writes="catalog/subscribers.py tests/test_subscribers.py",
                    ),
                ],
                [
                    "stale prices again after the message bus reconnects; keep working on the price change subscriber",
                    "price.changed events arriving out of order should not evict a newer cached price",
                ],
            ),
        ],
    ),
]
