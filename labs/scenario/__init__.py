"""The scenario engine: a scenario as data (model), run broken then fixed (runner), checked
(checks), reported (report, timeline, provenance of the run), listed (listing), all of them in one
run (run_all), rendered (render) and the README's table (readme_table). The browser scenarios'
driver (chromium) sits here because the catalogue declares it.
"""
