"""One-off: runs app/main.py under cProfile; the stats go to $PROFILE_OUT at exit.
    python benchmarks/diag/profiled.py [app flags ...]"""
import atexit
import cProfile
import os
import runpy
import sys

profile = cProfile.Profile()
atexit.register(lambda: (profile.disable(), profile.dump_stats(
    os.environ.get("PROFILE_OUT", "/tmp/app.prof"))))
args = sys.argv[1:]
if args and args[0].endswith("main.py"):
    args = args[1:]
sys.argv = ["app/main.py", *args]
sys.path.insert(0, os.getcwd())
profile.enable()
runpy.run_path("app/main.py", run_name="__main__")
