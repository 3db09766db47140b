"""Filtered views: topics that serve the records of another topic whose tags or headers match an
expression. The pure core lives here (expression, batch filtering, the match cache, the view's
configs); the catalogue of views is `metadata/views.py`, the fetch wiring `replica/view_reader.py`.
"""
