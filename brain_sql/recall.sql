with
  -- Hybrid recall as plain SQL: vector KNN, FTS5 BM25 and Personalized PageRank,
  -- fused by weighted Reciprocal Rank Fusion when :q is about an entity it names (the
  -- graph leads), else by a convex combination of each leg's min-max normalised
  -- scores. Parameters: :q, :k, and the filters
  -- :scope (a path: it and its parents), :classes and :sources (comma-separated),
  -- :domain, :since, :until (ISO times), and :as_of (ISO time: memories valid then;
  -- empty: now); an empty filter admits everything. Flagged, expired and archived
  -- (tier 0) memories never appear, nor memories not valid at :as_of (begun,
  -- not ended by valid_to, not superseded by a newer memory). Every filter acts
  -- inside each leg's own search, so a selective filter still fills the result.
request as materialized (
  select json_object('scope', :scope, 'classes', :classes, 'sources', :sources, 'domain', :domain,
                     'since', :since, 'until', :until, 'as_of', :as_of) as filters
),
visible as materialized (
  -- every filter's bound, read from the request as the JSON API reads it
  select brain_filters(filters) as bounds from request
),
weights as materialized (
  -- the graph leads (rrf) when :q names an entity the request can reach, and its words hold
  -- enough of :q (fusion.graph_leads); else convex
  select brain_fusion(:q, filters) as fusion, brain_leg_weight('vector', :q, filters) as vector,
         brain_leg_weight('fts', :q, filters) as fts, brain_leg_weight('graph', :q, filters) as graph
  from request
),
vec as materialized (
  select knowledge_id as id, distance
  from vec_knowledge
  where embedding_int8 match vec_int8(brain_embed(brain_query_text(:q), 'int8'))
    and k = brain_setting('candidates')
    and trim(brain_query_text(coalesce(:q, ''))) != ''  -- no query (or invisible marks only), no nearest neighbours
    and {vector_filters}
),
vec_ranked as materialized (
  -- a query of no words (NUL) embeds to no direction: no distance, no nearest neighbours
  select id, distance, 1.0 - distance as score, row_number() over (order by distance, id) as r
  from vec where distance is not null
),
fts_ranked as materialized (
  -- FTS5's bm25, its statistics counted over the rows the filters admit
  select j.value ->> 'id' as id, j.value ->> 'bm25' as bm25, j.key + 1 as r
  from request, json_each(brain_fts(:q, request.filters)) j
),
graph as materialized (
  -- seeds: the entities :q names, and the other legs' best passages
  select j.value ->> 'id' as id, j.value ->> 'score' as score, j.key + 1 as r
  from json_each(brain_ppr(:q,
    (select json_group_array(json_object('leg', leg, 'id', id, 'score', score)) from (
       select 'vector' as leg, id, 1.0 - distance as score, r from vec_ranked
       union all
       select 'fts', id, -bm25, r from fts_ranked
       order by leg desc, r)),
    (select filters from request))) j
),
normalised as (
  -- each leg's scores, higher better, min-max normalised over its own candidates
  select 'vector' as leg, id, r, score, min(score) over () as low, max(score) over () as high from vec_ranked
  union all
  select 'fts', id, r, -bm25, min(-bm25) over (), max(-bm25) over () from fts_ranked
  union all
  select 'graph', id, r, score, min(score) over (), max(score) over () from graph
),
legs as (
  select leg, id, r, case when high > low then (score - low) / (high - low) else 1.0 end as norm from normalised
),
fused as (
  select ids.id,
         case weights.fusion
           when 'rrf' then coalesce(brain_rrf(v.r, weights.vector), 0) + coalesce(brain_rrf(f.r, weights.fts), 0)
                           + coalesce(brain_rrf(g.r, weights.graph), 0)
           else coalesce(weights.vector * v.norm, 0) + coalesce(weights.fts * f.norm, 0)
                + coalesce(weights.graph * g.norm, 0)
         end as score,
         v.r as vector_rank, f.r as fts_rank, g.r as graph_rank
  from (select distinct id from legs) ids
  cross join weights
  left join legs v on v.leg = 'vector' and v.id = ids.id
  left join legs f on f.leg = 'fts' and f.id = ids.id
  left join legs g on g.leg = 'graph' and g.id = ids.id
),
dialogue as materialized (
  -- conversation turns ranked with their session and the speakers :q names (other memories as fused)
  select j.value ->> 'id' as id, j.value ->> 'score' as score
  from json_each(brain_dialogue(:q,
    -- each score to 17 digits, so the function reads the very doubles the API fuses
    (select '[' || coalesce(group_concat(printf('[%d,%!.17g]', id, score), ','), '') || ']'
     from (select id, score from fused order by score desc, id)),
    (select filters from request))) j
)
select k.id, k.title, brain_boost(dialogue.score, k.observed_at, k.confidence) as score,
       fused.vector_rank, fused.fts_rank, fused.graph_rank,
       k.class, k.scope, k.source, k.heading_path, k.source_path, k.content
from dialogue left join fused on fused.id = dialogue.id join knowledge k on k.id = dialogue.id
order by 3 desc, dialogue.id
limit brain_k(:k)
