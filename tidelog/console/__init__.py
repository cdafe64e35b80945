"""The web console the broker serves on its HTTP port (issue 31): pages for people, /api/ for scripts.

Imported only when the HTTP port starts (after the broker is ready), never on the start-up path.
See docs/ARCHITECTURE.md "Web console" and tidelog/console/http.py.
"""
