"""The decay facet: memories bucketed by relevance tier and expiry — expired,
expiring within 7 days, archived (tier 0), live — on any table with an expires_at column, and the _decay filter that
selecting a bucket applies."""

from datasette.database import QueryInterrupted
from datasette.facets import Facet
from datasette.filters import FilterArguments
from datasette.utils import path_with_added_args, path_with_removed_args

from brain_sql import for_plugin

BUCKETS = for_plugin.DECAY_BUCKETS


class DecayFacet(Facet):
    type = "decay"

    async def _has_expiry(self):
        # the _decay filter is knowledge's, so the facet is too
        return self.table == "knowledge"

    async def suggest(self):
        if self.get_configs() or not await self._has_expiry():
            return []
        return [
            {
                "name": "decay",
                "type": self.type,
                "toggle_url": self.ds.absolute_url(
                    self.request, path_with_added_args(self.request, {"_facet_decay": "expires_at"})
                ),
            }
        ]

    async def facet_results(self):
        if not self.get_configs() or not await self._has_expiry():
            return [], []
        try:
            rows = await self.ds.execute(
                self.database,
                for_plugin.decay_counts_sql(self.sql),
                self.params,
                custom_time_limit=self.ds.setting("facet_time_limit_ms"),
            )
        except QueryInterrupted:  # as Datasette's own facets: said to have timed out, the page still answers
            return [], ["decay"]
        counts = {row["bucket"]: row["count"] for row in rows}
        selected = self.request.args.get("_decay")
        results = []
        for name in BUCKETS:
            if name not in counts:
                continue
            is_selected = selected == name
            path = (
                path_with_removed_args(self.request, {"_decay": name})
                if is_selected
                else path_with_added_args(self.request, {"_decay": name})
            )
            results.append(
                {
                    "value": name,
                    "label": name,
                    "count": counts[name],
                    "selected": is_selected,
                    "toggle_url": self.ds.absolute_url(self.request, path),
                }
            )
        return [
            {
                "name": "decay",
                "type": self.type,
                "results": results,
                "hideable": True,
                "toggle_url": self.ds.absolute_url(
                    self.request, path_with_removed_args(self.request, {"_facet_decay": "expires_at"})
                ),
                "truncated": False,
            }
        ], []


def decay_filter(request):
    """?_decay=expired (or another bucket) as a where clause."""
    selected = request.args.get("_decay")
    if selected is None:
        return None
    if selected not in BUCKETS:
        return FilterArguments(
            ["0"], human_descriptions=[f"unknown decay bucket {for_plugin.shown(selected)}: no rows"]
        )
    return FilterArguments(
        [for_plugin.decay_filter_sql(selected)], {"decay_bucket": selected}, [f"decay is {selected}"]
    )
