"""`python app/report.py RUN [RUN ...] --out DIR`: the report's command, kept here as a
file a person runs. The report itself is the package of the same name, app/report/
(`import app.report` finds the package: a folder holding __init__.py is found before
a module of its name); this file only puts the repository root on the path and calls
app/report/command.py's `main`.
"""

import os
import sys

if __name__ == "__main__":  # `python app/report.py`: the packages live one level up
    sys.path[0] = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    from app.report.command import main

    sys.exit(main())
