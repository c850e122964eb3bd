"""gunicorn: a Flask app streaming with `requests` (`wsgi_app.py`) under gunicorn's workers."""
