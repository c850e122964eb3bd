"""The scenario engine: a scenario as data (model), run broken then fixed (runner), checked
(checks), reported (report, timeline), listed (listing) and all of them in one run (run_all). The
browser scenarios' driver (chromium, browser_spec) sits here because the catalogue declares it.
The scenarios themselves are labs/catalogue/, which also renders their configs and the README's
table from them.
"""
