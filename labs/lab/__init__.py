"""The lab's own server and hops as the products meet them, below every product that does.

    server    the model server: the script it is asked to stream by default, the model it
              serves, when it has finished (served_model, wait_idle)
    exposing  what it is asked to do so that a hop's fault shows (EXPOSING, CLOSE_DELIMITED)
    hops      the proxies and apps between client and server: where they run (runtime_named),
              which kind a path entry is (hop_kind), the settings one starts with (hop_settings)

The scenario runner, verify, probe, load and bench all talk to the same server and start the same
hops; each asks here rather than borrowing it from another product.
"""
