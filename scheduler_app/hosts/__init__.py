"""What the scheduler knows of hosts through their GPUs and runs: the hosts board (board) and
the runs of a host declared dead or back (down). Here, not in hosts_app, because both read
GPU and Run rows, and hosts_app sits below scheduler_app."""
