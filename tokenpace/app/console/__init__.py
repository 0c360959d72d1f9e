"""The web console (`tokenpace ui`): read-only pages over the run store, each with a JSON twin.

Adding a page takes three things, and nothing else changes:

1. A data function ``def my_data(store: Store, ask: Ask) -> dict[str, Any]`` in a module of this
   room (``my_page.py``): it reads the store through its protocol only (never SQL), reads its
   filters with ``ask`` (bounded: ``ask.text``, ``ask.number``, ``ask.all``, ``ask.path``), raises
   ``NotFound`` or ``BadAsk`` for a missing run or a bad filter, and returns plain JSON data: that
   dict is the page's ``/api/...`` answer and its template's context (keys starting with ``_``
   reach the template and charts only, never the JSON: records, objects). Charts, if any, come from a
   second function ``def my_charts(data) -> list[Chart]`` (plotly figures from the same data; it
   never changes the data: a cached page's HTML may be drawn later from the data kept for it). A
   read worth reusing between requests goes through ``ask.kept`` (``page.Kept``, bounded; None
   offline), keyed by all it depends on: the rollout page keeps a session's traffic so.
2. A template ``templates/my.html`` that extends ``base.html`` and fills ``{% block body %}``;
   autoescape is on (never ``|safe`` on stored text), charts are drawn with the ``charts`` macro.
3. One line in ``PAGES`` (``routes.py``): ``Page("my", "/my/{ref}", "my.html", my_data, "My",
   my_charts)``. The server then answers ``GET /my/{ref}`` (HTML) and ``GET /api/my/{ref}`` (JSON).

Owns: the page registry (``routes``), query parsing and its bounds (``ask``), templates and charts
(``render``), access and security (``access``), the aiohttp server (``server``), and the pages:
runs, run, compare, history; offline HTML of compare and history for ``report --html`` (``offline``).
Uses the store's protocol, ``app/baseline`` (compare, noise), ``app/reports`` and
``adapters/report`` (the run report's tables and figures); the statistics are core's.
"""
