"""The review web app's routes and helpers, one concern per module: ``auth`` (login, logout),
``reviewer`` (the queue and an assignment's page), ``context`` (the record pane's paging and
search), ``admin`` (progress and agreement), over ``security`` (session, CSRF, roles), ``data``
(blinded views read from the database), ``forms`` (form ↔ payload), ``record`` (paging and search
of a long text) and ``render`` (templates). :func:`clinieval.review.app.create_app` assembles them.
"""
