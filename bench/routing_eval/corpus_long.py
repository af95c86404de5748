"""Sessions of the evaluation set: long-running sessions that moved through many sub-tasks (deep checkpoints).

Each keeps one agent busy in one workspace for weeks, so the checkpoint a task belongs to is often
deep inside the session, with later (unrelated) work on top of it, and its vocabulary overlaps the
shorter sessions of the other corpus files on purpose.
"""

from __future__ import annotations

from spec import E, Sess, T

SESSIONS = [
    Sess(
        "api-maintenance",
        "backend",
        "shop-api",
        44,
        [
            E(
                "django upgrade",
                [
                    T(
                        "Upgrade the API from Django 4.2 to 5.1",
                        "Bumped Django, fixed removed APIs (DEFAULT_FILE_STORAGE -> STORAGES, pytz usages), tests green.",
                        reads="requirements.txt settings/base.py",
                        writes="requirements.txt settings/base.py",
                    ),
                    T(
                        "The admin crashes on the orders changelist after the upgrade",
                        "A custom list_filter used the removed queryset signature; updated admin/filters.py.",
                        writes="admin/filters.py",
                    ),
                ],
                [
                    "keep going with the django 5 upgrade: the admin orders filter still breaks on date ranges",
                    "after moving to the new Django release some deprecation warnings remain in settings; clean them up",
                ],
            ),
            E(
                "n+1 orders",
                [
                    T(
                        "The order list endpoint makes 300 queries for 100 orders",
                        "Added select_related('customer') and prefetch_related('items__product') in orders/views.py; 300 -> 4 queries.",
                        reads="orders/views.py",
                        writes="orders/views.py",
                    ),
                    T(
                        "Add a test that fails when the order list goes over 10 queries",
                        "tests/test_orders_queries.py uses django_assert_max_num_queries(10).",
                        writes="tests/test_orders_queries.py",
                    ),
                ],
                [
                    "the order list API is doing too many SQL queries again for line items with variants; continue the N+1 fix",
                    "extend the query-count guard test to the order detail endpoint",
                ],
            ),
            E(
                "health checks",
                [
                    T(
                        "Add liveness and readiness endpoints for Kubernetes",
                        "GET /healthz (process up) and /readyz (DB and Redis reachable, 1 s timeout each).",
                        writes="api/health.py api/routes.py",
                    ),
                ],
                [
                    "the readiness probe of the api should also check the message broker connection",
                    "continue with the health endpoints: readyz must not hit the database on every probe, cache it for 5 s",
                ],
            ),
            E(
                "coupon codes",
                [
                    T(
                        "Add coupon codes: percentage or fixed amount, with an expiry date",
                        "Coupon model, validation service and POST /cart/coupon; one coupon per cart.",
                        writes="coupons/models.py coupons/service.py api/routes.py",
                    ),
                    T(
                        "Coupons should be limited to a number of uses per customer",
                        "Added CouponRedemption with a unique constraint per (coupon, customer) and a max_uses_per_customer field.",
                        writes="coupons/models.py coupons/service.py migrations/0051_coupon_redemption.py",
                    ),
                    T(
                        "Stacking: allow one percentage coupon and one free-shipping coupon together",
                        "Coupons have a kind; the cart accepts at most one of each kind.",
                        writes="coupons/service.py tests/test_coupons.py",
                    ),
                ],
                [
                    "discount codes: a customer can still redeem the same code twice by racing two requests; continue the coupons work",
                    "keep working on coupon stacking, free shipping codes should not combine with a fixed amount one",
                ],
            ),
            E(
                "csv export",
                [
                    T(
                        "Admins want to export orders as CSV",
                        "Added an admin action streaming a CSV (StreamingHttpResponse) with the order lines.",
                        writes="admin/exports.py admin/orders.py",
                    ),
                ],
                [
                    "the orders csv export from the admin times out for a full year; continue with the streaming export",
                    "add the coupon code and discount columns to the admin orders export",
                ],
            ),
        ],
    ),
    Sess(
        "web-app-polish",
        "frontend",
        "shop-web",
        42,
        [
            E(
                "image lazy loading",
                [
                    T(
                        "Product images load all at once on the category page",
                        "Added loading=lazy and width/height to product images, plus a blurred placeholder.",
                        reads="src/components/ProductCard.tsx",
                        writes="src/components/ProductCard.tsx",
                    ),
                ],
                [
                    "category pages still jump when images appear; continue with the image placeholders",
                ],
            ),
            E(
                "cart drawer",
                [
                    T(
                        "Replace the cart page with a slide-in cart drawer",
                        "New CartDrawer component with focus trap, opened from the header cart icon.",
                        writes="src/cart/CartDrawer.tsx src/components/Header.tsx",
                    ),
                    T(
                        "Update quantities in the drawer optimistically",
                        "Quantity changes update local state at once and roll back with a toast if the API fails.",
                        writes="src/cart/CartDrawer.tsx src/cart/useCart.ts",
                    ),
                ],
                [
                    "the slide-in basket should close when you click outside of it; keep going with the cart drawer",
                    "optimistic quantity updates in the mini cart show a wrong total when two changes overlap",
                ],
            ),
            E(
                "web vitals",
                [
                    T(
                        "Our Largest Contentful Paint is 4.2 s on mobile",
                        "Preloaded the hero image, inlined critical CSS, deferred the chat widget; LCP 2.1 s in lab tests.",
                        writes="src/pages/Home.tsx public/index.html",
                    ),
                ],
                [
                    "continue the page speed work: cumulative layout shift from the cookie banner",
                    "LCP is good in the lab but field data still says 3.5 s; continue improving the largest contentful paint",
                ],
            ),
            E(
                "wishlist",
                [
                    T(
                        "Add a wishlist: heart icon on product cards, a wishlist page",
                        "Wishlist stored per user via /api/wishlist, anonymous users in localStorage and merged at login.",
                        writes="src/wishlist/WishlistPage.tsx src/wishlist/useWishlist.ts src/components/ProductCard.tsx",
                    ),
                ],
                [
                    "share a wishlist via a public link; continue the wishlist feature",
                    "when an anonymous user logs in, items saved before are lost from their wish list sometimes",
                ],
            ),
        ],
    ),
    Sess(
        "data-platform",
        "data",
        "warehouse",
        43,
        [
            E(
                "dbt models",
                [
                    T(
                        "Set up dbt for the warehouse with staging models for orders and customers",
                        "dbt project with stg_orders and stg_customers, sources with freshness checks.",
                        writes="dbt/models/staging/stg_orders.sql dbt/models/staging/stg_customers.sql dbt/dbt_project.yml",
                    ),
                    T(
                        "Add tests for uniqueness and not-null on the staging models",
                        "schema.yml tests: unique and not_null on ids, relationships from orders to customers.",
                        writes="dbt/models/staging/schema.yml",
                    ),
                ],
                [
                    "the dbt relationship test from orders to customers fails for guest checkouts; continue the staging models",
                    "add an accepted_values test for order status in the dbt staging schema",
                ],
            ),
            E(
                "customer ltv mart",
                [
                    T(
                        "Build a customer lifetime value mart on top of staging",
                        "fct_customer_ltv: revenue, orders, first/last order date per customer, incremental by day.",
                        writes="dbt/models/marts/fct_customer_ltv.sql",
                    ),
                ],
                [
                    "the lifetime value mart double counts refunded orders; keep working on fct_customer_ltv",
                ],
            ),
            E(
                "data quality alerts",
                [
                    T(
                        "Alert in Slack when a dbt test fails in the nightly run",
                        "The nightly dbt job posts failed tests with their counts to #data-alerts via a webhook.",
                        writes="jobs/dbt_nightly.py jobs/slack.py",
                    ),
                ],
                [
                    "continue the dbt failure notifications: only alert once per failing test per day",
                    "data test failures posted to slack should link to the failing rows query",
                ],
            ),
            E(
                "pii masking",
                [
                    T(
                        "Mask emails and phone numbers in the analytics schema",
                        "A macro hashes emails and truncates phones in every mart; raw PII stays in the restricted schema.",
                        writes="dbt/macros/mask_pii.sql dbt/models/marts/fct_customer_ltv.sql",
                    ),
                ],
                [
                    "the personal data masking macro should also cover street addresses",
                    "analysts need to join on customers without seeing emails; keep going with the PII hashing in dbt",
                ],
            ),
        ],
    ),
    Sess(
        "mobile-release-train",
        "mobile",
        "mobile-app",
        40,
        [
            E(
                "fastlane",
                [
                    T(
                        "Automate the iOS build and TestFlight upload with fastlane",
                        "Fastfile lane beta: match for signing, gym build, pilot upload; runs on the CI macOS runner.",
                        writes="fastlane/Fastfile fastlane/Matchfile",
                    ),
                ],
                [
                    "the fastlane beta lane fails on code signing on CI; keep working on match",
                    "also upload Android builds to the Play Console internal track in the same fastlane setup",
                ],
            ),
            E(
                "crash reporting",
                [
                    T(
                        "Add crash reporting to the mobile app",
                        "Integrated Sentry for React Native with source maps and dSYM upload in the release lane.",
                        writes="src/sentry.ts fastlane/Fastfile",
                    ),
                ],
                [
                    "crash reports from the app show minified stack traces; continue the source map upload",
                ],
            ),
            E(
                "push notifications",
                [
                    T(
                        "Send push notifications for order status changes",
                        "FCM/APNs via Firebase Messaging; device tokens registered at login; order shipped/delivered pushes.",
                        writes="src/push/registerDevice.ts src/push/handlers.ts",
                    ),
                    T(
                        "Notifications open the app on the wrong screen",
                        "Deep links in the payload now route to the order detail screen, also from a cold start.",
                        writes="src/push/handlers.ts src/navigation/linking.ts",
                    ),
                ],
                [
                    "tapping an order shipped notification while the app is closed still lands on the home screen; continue",
                    "let users mute marketing pushes but keep order updates in the notification settings",
                ],
            ),
        ],
    ),
]
