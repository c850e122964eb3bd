"""`make bench-peers`: the lab's measuring client beside AIPerf and guidellm on one server (compare),
each tool in its own process and venv (install), one module per tool (lab, aiperf, guidellm), their
figures in one shape (figures) and one table (table).
"""
