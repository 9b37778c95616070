"""Built-in tasks. Each module exposes one factory returning a :class:`clinieval.task.Task`."""
