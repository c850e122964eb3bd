"""`labs load URL`: load on the user's own deployed path, steps of concurrent streams until a limit
is found (ramp), run by the lab's client or through Locust (locust_run, with the load lab's
locustfile), named as a finding (cli). The load lab, which ramps the lab's own paths, is labs.load.
"""
