"""django: a Django view returning a StreamingHttpResponse (`django_app.py`), under uvicorn or gunicorn."""
