"""Helpers every app shares (ids, JSON safety, database outages, the API's error contract,
the environment): the leaf under the apps, importing none of them."""
