"""Sessions of the evaluation set: front end, documentation, payments and search."""

from __future__ import annotations

from spec import E, Sess, T

SESSIONS = [
    Sess(
        "dark-mode",
        "frontend",
        "shop-web",
        31,
        [
            E(
                "theme toggle",
                [
                    T(
                        "Add a dark mode toggle to the settings page",
                        "Added a ThemeProvider with CSS variables for light/dark and a toggle in src/pages/Settings.tsx; the "
                        "choice is saved in localStorage.",
                        reads="src/pages/Settings.tsx",
                        writes="src/theme/ThemeProvider.tsx src/theme/tokens.css src/pages/Settings.tsx",
                    ),
                    T(
                        "Follow the operating system's preference until the user picks one",
                        "Uses prefers-color-scheme as the default and listens for changes while no explicit choice is stored.",
                        writes="src/theme/ThemeProvider.tsx",
                    ),
                ],
                [
                    "the night theme flashes white on first load before the stored choice is applied; continue with the theme provider",
                    "dark mode: charts and code blocks still use light colors, extend the css variables",
                ],
            ),
        ],
    ),
    Sess(
        "checkout-validation",
        "frontend",
        "shop-web",
        22,
        [
            E(
                "form validation",
                [
                    T(
                        "Validate the checkout address form on the client",
                        "Moved the checkout form to react-hook-form with a zod schema (postal code per country, required "
                        "fields), errors shown inline.",
                        reads="src/checkout/AddressForm.tsx",
                        writes="src/checkout/AddressForm.tsx src/checkout/schema.ts",
                    ),
                ],
                [
                    "postal codes for Canada are rejected by the checkout address form validation; fix the zod schema",
                    "continue the address form work in checkout: show the errors only after the field was touched",
                ],
            ),
            E(
                "payment step errors",
                [
                    T(
                        "Show card errors from the payment step next to the card field",
                        "Mapped Stripe Elements error codes to messages in src/checkout/PaymentStep.tsx.",
                        writes="src/checkout/PaymentStep.tsx src/i18n/en/checkout.json",
                    ),
                ],
                [
                    "declined card messages in the payment step of checkout need translations too",
                ],
            ),
        ],
    ),
    Sess(
        "navbar-a11y",
        "frontend",
        "shop-web",
        15,
        [
            E(
                "keyboard nav",
                [
                    T(
                        "Run an accessibility audit on the top navigation bar",
                        "axe found: menu buttons without aria-expanded, dropdowns not reachable by keyboard, low contrast links.",
                        reads="src/components/NavBar.tsx",
                    ),
                    T(
                        "Fix the keyboard navigation and ARIA attributes of the nav menus",
                        "Menus are now buttons with aria-expanded/aria-controls, arrow keys move focus, Escape closes.",
                        writes="src/components/NavBar.tsx src/components/NavMenu.tsx",
                    ),
                ],
                [
                    "screen readers announce the nav dropdowns wrongly; keep going on the navbar aria fixes",
                    "continue the accessibility work on the header menus: focus should return to the button on escape",
                ],
            ),
        ],
    ),
    Sess(
        "chart-perf",
        "frontend",
        "analytics",
        7,
        [
            E(
                "canvas charts",
                [
                    T(
                        "The analytics dashboard freezes with 50k points in the line chart",
                        "SVG rendering was the bottleneck; switched the time series to a canvas renderer with LTTB "
                        "downsampling to 2k points per series.",
                        reads="web/charts/LineChart.tsx",
                        writes="web/charts/LineChart.tsx web/charts/downsample.ts",
                    ),
                ],
                [
                    "the line chart with many points is smooth now but tooltips show the downsampled value; continue on the canvas chart",
                    "dashboard time-series rendering: downsample per visible range when the user zooms",
                ],
            ),
        ],
    ),
    Sess(
        "openapi-docs",
        "docs",
        "shop-api",
        28,
        [
            E(
                "reference docs",
                [
                    T(
                        "Generate API reference docs for the REST endpoints",
                        "Added OpenAPI schemas to every route (api/schemas.py) and a docs build that renders them with Redoc.",
                        reads="api/app.py",
                        writes="api/schemas.py docs/api/index.html scripts/build_api_docs.sh",
                    ),
                    T(
                        "Document the error responses too",
                        "Every endpoint now lists 400/401/404/429 with the shared Error schema and examples.",
                        writes="api/schemas.py",
                    ),
                ],
                [
                    "the endpoint reference should also show example requests with curl; continue the openapi docs",
                    "document rate-limit headers in the REST API reference",
                ],
            ),
        ],
    ),
    Sess(
        "readme-quickstart",
        "docs",
        "sdk-python",
        11,
        [
            E(
                "quickstart",
                [
                    T(
                        "Rewrite the README quickstart: it still shows the v1 client",
                        "New quickstart: install, create a client with an API key from the environment, first request, "
                        "error handling.",
                        reads="README.md",
                        writes="README.md",
                    ),
                ],
                [
                    "the sdk readme getting started section should show the async client as well",
                ],
            ),
            E(
                "examples dir",
                [
                    T(
                        "Move the long examples out of the README into examples/",
                        "Added examples/pagination.py, examples/retries.py, examples/async_batch.py, linked from the README.",
                        writes="examples/pagination.py examples/retries.py examples/async_batch.py README.md",
                    ),
                ],
                [
                    "add a streaming example next to the pagination and retries examples of the sdk",
                    "the examples folder scripts should run in CI so they do not rot; continue there",
                ],
            ),
        ],
    ),
    Sess(
        "migration-guide",
        "docs",
        "sdk-python",
        5,
        [
            E(
                "v1 to v2 guide",
                [
                    T(
                        "Write a migration guide from SDK v1 to v2",
                        "docs/migrating-to-v2.md: renamed methods table, the new error classes, async client, removed options.",
                        writes="docs/migrating-to-v2.md",
                    ),
                ],
                [
                    "the v2 upgrade guide should mention that timeouts are now in seconds rather than milliseconds",
                    "continue the v1 to v2 migration doc with a section about the new exceptions",
                ],
            ),
        ],
    ),
    Sess(
        "stripe-webhooks",
        "payments",
        "shop-api",
        25,
        [
            E(
                "signature check",
                [
                    T(
                        "Verify Stripe webhook signatures",
                        "payments/webhooks.py now checks the Stripe-Signature header with the endpoint secret and a 5 minute "
                        "tolerance; rejects with 400.",
                        reads="payments/webhooks.py",
                        writes="payments/webhooks.py",
                    ),
                    T(
                        "Handle duplicate webhook deliveries",
                        "Events are stored by event id (payments/models.py) and processed once; duplicates return 200.",
                        writes="payments/webhooks.py payments/models.py",
                    ),
                ],
                [
                    "stripe sometimes sends the same event twice and we charge twice in fulfillment; continue on webhook idempotency",
                    "the webhook handler should process events asynchronously after verifying the signature",
                ],
            ),
        ],
    ),
    Sess(
        "invoice-pdf",
        "payments",
        "billing",
        18,
        [
            E(
                "pdf invoices",
                [
                    T(
                        "Generate a PDF invoice when an order is paid",
                        "billing/invoice_pdf.py renders an HTML template with WeasyPrint; stored in S3, linked in the receipt email.",
                        writes="billing/invoice_pdf.py billing/templates/invoice.html",
                    ),
                    T(
                        "Invoices need the company VAT number and a sequential invoice number",
                        "Added a gapless invoice_number sequence per year and the seller/buyer VAT ids on the PDF.",
                        writes="billing/invoice_pdf.py billing/numbering.py",
                    ),
                ],
                [
                    "the invoice numbers must restart every january; continue with the pdf invoice numbering",
                    "pdf invoices: EU customers need the reverse-charge note when they have a VAT id",
                ],
            ),
        ],
    ),
    Sess(
        "refund-rounding",
        "payments",
        "billing",
        10,
        [
            E(
                "partial refunds",
                [
                    T(
                        "Partial refunds are off by one cent for some orders",
                        "Amounts were floats; refunds now use integer cents and distribute rounding over line items "
                        "(largest remainder).",
                        reads="billing/refunds.py",
                        writes="billing/refunds.py billing/money.py",
                    ),
                ],
                [
                    "one cent differences on partial refunds came back for discounted orders; keep working on refund rounding",
                    "add property-based tests that partial refunds always add up to the amount paid",
                ],
            ),
        ],
    ),
    Sess(
        "proration",
        "payments",
        "billing",
        2,
        [
            E(
                "plan change proration",
                [
                    T(
                        "Upgrading a subscription mid-cycle charges the full price",
                        "Compute proration from the remaining seconds of the period; credit the unused part of the old plan.",
                        reads="billing/subscriptions.py",
                        writes="billing/subscriptions.py billing/proration.py",
                    ),
                ],
                [
                    "downgrades in the middle of a billing period should create a credit, continue the proration work",
                    "subscription upgrade proration is wrong for annual plans; look again",
                ],
            ),
        ],
    ),
    Sess(
        "search-typos",
        "search",
        "shop-api",
        20,
        [
            E(
                "fuzzy search",
                [
                    T(
                        "Product search finds nothing for 'iphnoe' or 'adiddas'",
                        "Enabled fuzziness AUTO on the Elasticsearch multi_match and a prefix_length of 1.",
                        reads="search/query.py",
                        writes="search/query.py",
                    ),
                    T(
                        "Fuzzy matching makes exact matches rank lower",
                        "Added a bool query: exact match clause boosted x3, fuzzy clause as should.",
                        writes="search/query.py tests/test_search_query.py",
                    ),
                ],
                [
                    "misspelled brand names still return nothing in product search; continue the fuzzy query tuning",
                    "with typo tolerance on, exact product name hits should still come first; keep working on that boost",
                ],
            ),
        ],
    ),
    Sess(
        "search-stock-boost",
        "search",
        "shop-api",
        11,
        [
            E(
                "in-stock ranking",
                [
                    T(
                        "Search results show out-of-stock products at the top",
                        "Added a function_score with a boost for in_stock and a decay on days since last restock.",
                        reads="search/query.py",
                        writes="search/query.py search/mapping.json",
                    ),
                ],
                [
                    "sold out items still rank too high in search results; continue the function score for availability",
                ],
            ),
        ],
    ),
    Sess(
        "autocomplete",
        "search",
        "shop-api",
        3,
        [
            E(
                "suggest endpoint",
                [
                    T(
                        "Add an autocomplete endpoint for the search box",
                        "Added GET /search/suggest using an edge_ngram analyzer on product names, top 8, 50 ms budget.",
                        writes="search/suggest.py search/mapping.json api/routes.py",
                    ),
                ],
                [
                    "search-as-you-type suggestions should include categories and not just product names",
                    "the suggest endpoint returns duplicates for product variants; continue with autocomplete",
                ],
            ),
        ],
    ),
]
