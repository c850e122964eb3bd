"""`labs load URL`: load on the user's own deployed path, steps of concurrent streams until a limit
is found (ramp), named as a finding (cli). The load lab, which ramps the lab's own paths, is labs.load.
"""
