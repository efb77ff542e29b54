"""The decay facet: memories bucketed by expiry — expired, expiring within 7
days, live — on any table with an expires_at column, and the _decay filter that
selecting a bucket applies."""

from datasette.facets import Facet
from datasette.filters import FilterArguments
from datasette.utils import path_with_added_args, path_with_removed_args

# one CASE for the facet and the filter, so a bucket always selects what it counted
BUCKET = """case
  when expires_at is not null and unixepoch(expires_at) <= unixepoch('now') then 'expired'
  when expires_at is not null and unixepoch(expires_at) <= unixepoch('now', '+7 days') then 'expiring within 7 days'
  else 'live' end"""
BUCKETS = ("expired", "expiring within 7 days", "live")


class DecayFacet(Facet):
    type = "decay"

    async def _has_expiry(self):
        columns = await self.get_columns(self.sql, self.params)
        return "expires_at" in columns

    async def suggest(self):
        if self.get_configs() or not await self._has_expiry():
            return []
        return [
            {
                "name": "decay",
                "type": self.type,
                "toggle_url": self.ds.absolute_url(self.request, path_with_added_args(self.request, {"_facet_decay": "expires_at"})),
            }
        ]

    async def facet_results(self):
        if not self.get_configs() or not await self._has_expiry():
            return [], []
        rows = await self.ds.execute(
            self.database,
            f"select {BUCKET} as bucket, count(*) as count from ({self.sql}) group by bucket",
            self.params,
            custom_time_limit=self.ds.setting("facet_time_limit_ms"),
        )
        counts = {row["bucket"]: row["count"] for row in rows}
        selected = self.request.args.get("_decay")
        results = []
        for bucket in BUCKETS:
            if bucket not in counts:
                continue
            is_selected = selected == bucket
            path = (
                path_with_removed_args(self.request, {"_decay": bucket})
                if is_selected
                else path_with_added_args(self.request, {"_decay": bucket})
            )
            results.append(
                {"value": bucket, "label": bucket, "count": counts[bucket], "selected": is_selected,
                 "toggle_url": self.ds.absolute_url(self.request, path)}  # fmt: skip
            )
        return [
            {
                "name": "decay",
                "type": self.type,
                "results": results,
                "hideable": True,
                "toggle_url": self.ds.absolute_url(self.request, path_with_removed_args(self.request, {"_facet_decay": "expires_at"})),
                "truncated": False,
            }
        ], []


def decay_filter(request):
    """?_decay=expired (or another bucket) as a where clause."""
    bucket = request.args.get("_decay")
    if bucket is None:
        return None
    if bucket not in BUCKETS:
        return FilterArguments(["0"], human_descriptions=[f"unknown decay bucket {bucket!r}: no rows"])
    return FilterArguments([f"{BUCKET} = :decay_bucket"], {"decay_bucket": bucket}, [f"decay is {bucket}"])
