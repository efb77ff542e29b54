"""POST /-/brain/v1/embeddings through the official `openai` client, against
Datasette's real ASGI app in-process: OpenAI's own decoding and error parsing."""

import base64
import shutil
import urllib.parse
from pathlib import Path

import httpx
import numpy as np
import openai
import pytest
from datasette.app import Datasette

import brain_sql
from brain_sql.config import DEFAULT_MODEL

from .conftest import model_folder

MODEL = "wordllama/l2_supercat"
TEXTS = ["who owns the support runbook?", "graph leg"]


def client_for(datasette):
    transport = httpx.ASGITransport(app=datasette.app())
    return openai.AsyncOpenAI(
        base_url="http://localhost/-/brain/v1",
        api_key="x",
        max_retries=0,
        http_client=httpx.AsyncClient(transport=transport),
    )


@pytest.fixture
def client(vault_brain_path):
    return client_for(Datasette([str(vault_brain_path)]))


def matrix(response):
    return np.array([d.embedding for d in response.data], dtype=np.float32)


@pytest.mark.asyncio
async def test_the_clients_default_model_gets_the_brains_model(client):
    # the client's defaults: a model of OpenAI's, and base64 that it decodes itself
    response = await client.embeddings.create(input=TEXTS, model="text-embedding-3-small")
    assert response.model == MODEL
    assert [d.index for d in response.data] == [0, 1]
    expected, tokens = brain_sql.embed_with_usage(TEXTS, MODEL)
    assert matrix(response).shape == (2, 256)
    np.testing.assert_array_equal(matrix(response), expected)
    assert response.usage.prompt_tokens == response.usage.total_tokens == tokens > 0


@pytest.mark.asyncio
async def test_base64_and_float_give_the_same_vectors(client):
    floats = await client.embeddings.create(input=TEXTS, model=MODEL, encoding_format="float")
    assert all(isinstance(d.embedding, list) for d in floats.data)
    encoded = await client.embeddings.create(input=TEXTS, model=MODEL, encoding_format="base64")
    # asked for explicitly, base64 is left to the caller: little-endian float32 bytes
    decoded = np.array([np.frombuffer(base64.b64decode(d.embedding), dtype="<f4") for d in encoded.data])
    np.testing.assert_array_equal(decoded, matrix(floats))
    np.testing.assert_array_equal(matrix(floats), brain_sql.embed_with_usage(TEXTS, MODEL)[0])
    single = await client.embeddings.create(input=TEXTS[0], model=MODEL, encoding_format="float")
    np.testing.assert_array_equal(matrix(single)[0], matrix(floats)[0])


@pytest.mark.asyncio
async def test_the_models_own_dimension_is_accepted_and_no_other(client):
    same = await client.embeddings.create(input="graph leg", model=MODEL, dimensions=256)
    assert len(same.data[0].embedding) == 256
    with pytest.raises(openai.BadRequestError) as raised:
        await client.embeddings.create(input="graph leg", model=MODEL, dimensions=128)
    assert "dimensions" in raised.value.message and "256" in raised.value.message
    assert raised.value.param == "dimensions"
    assert raised.value.body["type"] == "invalid_request_error"


@pytest.mark.asyncio
async def test_bad_input_is_a_400_the_client_can_read(client):
    cases = [
        ({"input": ""}, "input is an empty string", "input"),
        ({"input": ["graph", ""]}, "input[1] is an empty string", "input"),
        ({"input": [1917, 374]}, "text only", "input"),
        ({"input": [[1917, 374]]}, "text only", "input"),
        ({"input": "x", "encoding_format": "int8"}, "encoding_format", "encoding_format"),
        ({"input": "x", "extra_body": {"truncate": "END"}}, "unknown field: 'truncate'", "truncate"),
    ]
    for kwargs, message, param in cases:
        with pytest.raises(openai.BadRequestError) as raised:
            await client.embeddings.create(model=MODEL, **kwargs)
        assert message in raised.value.message, kwargs
        assert raised.value.param == param, kwargs
    ignored = await client.embeddings.create(input="graph leg", model=MODEL, user="agent-7")
    assert len(ignored.data[0].embedding) == 256


@pytest.mark.asyncio
async def test_a_text_longer_than_the_model_reads_is_refused_not_cut(client):
    """The model reads 512 tokens of a text: two texts alike in their first 600 words
    got one vector, without a word (review 101). OpenAI's answer to a text past a
    model's context is a 400 naming it; so is this route's."""
    start = " ".join(f"word{i}" for i in range(600))
    with pytest.raises(openai.BadRequestError) as raised:
        await client.embeddings.create(model=MODEL, input=["graph leg", start + " and then one ending"])
    assert raised.value.param == "input" and raised.value.code == "context_length_exceeded"
    assert "input[1] is" in raised.value.message and "reads at most 512 tokens" in raised.value.message
    fits = " ".join(["graph"] * 400)
    assert (await client.embeddings.create(model=MODEL, input=fits)).usage.prompt_tokens == 400
    # review 103: the model cuts a text at 2,560 characters before it counts its tokens (a padded table)
    table = "\n".join(f"| row {i:<3} | {'':<50} | {'':<14} |" for i in range(34))
    with pytest.raises(openai.BadRequestError) as raised:
        await client.embeddings.create(model=MODEL, input=[table + "\n| last | one |"])
    assert raised.value.code == "context_length_exceeded" and "characters" in raised.value.message
    with pytest.raises(openai.BadRequestError) as raised:  # one string is `input`, not input[0] (review 112)
        await client.embeddings.create(model=MODEL, input=table + "\n| last | one |")
    assert "- input is 2,802 characters" in raised.value.message, raised.value.message
    # review 104: measured as embedded (composed, invisible marks removed), not as sent
    marked = "ab \u200e\u200e\u200e\u200e" * 370  # 2,590 characters sent, 1,110 embedded
    assert len((await client.embeddings.create(model=MODEL, input=marked)).data) == 1
    growing = "\u0958" * 100 + " " + "-" * 2400 + " the harbour opens at dawn"  # 2,527 sent, 2,627 composed
    with pytest.raises(openai.BadRequestError) as raised:
        await client.embeddings.create(model=MODEL, input=growing)
    assert "2,627 characters" in raised.value.message


@pytest.mark.asyncio
async def test_permission_size_and_method_errors_in_openais_shape(vault_brain_path):
    denied = client_for(Datasette([str(vault_brain_path)], metadata={"allow": False}))
    with pytest.raises(openai.PermissionDeniedError) as raised:
        await denied.embeddings.create(input="graph leg", model=MODEL)
    assert raised.value.status_code == 403 and raised.value.body["message"]
    datasette = Datasette([str(vault_brain_path)])
    with pytest.raises(openai.APIStatusError) as raised:
        await client_for(datasette).embeddings.create(input="x" * 1_200_000, model=MODEL)
    assert raised.value.status_code == 413 and "the limit is" in raised.value.message
    get = await datasette.client.get("/-/brain/v1/embeddings")
    assert get.status_code == 405 and get.headers["allow"] == "POST"
    assert set(get.json()["error"]) == {"message", "type", "param", "code"}


def brain_of_another_model(tmp_path):
    """(other.db, the folder of its model): a brain made with a 128-dimensional model2vec model."""
    folder = Path(model_folder(tmp_path / "model128", lambda vectors: vectors[:, :128]))
    other = tmp_path / "other.db"
    conn = brain_sql.connect(other, str(folder))
    brain_sql.migrate(conn, str(folder))
    conn.close()
    return other, folder


@pytest.mark.asyncio
async def test_several_models_must_be_named(vault_brain_path, tmp_path):
    other, folder = brain_of_another_model(tmp_path)
    client = client_for(Datasette([str(vault_brain_path), str(other)]))
    with pytest.raises(openai.BadRequestError) as raised:
        await client.embeddings.create(input="graph leg", model="text-embedding-3-small")
    assert MODEL in raised.value.message and str(folder) in raised.value.message
    assert raised.value.code == "model_not_found"
    assert sorted(m.id for m in (await client.models.list()).data) == sorted([MODEL, str(folder)])
    small = await client.embeddings.create(input="graph leg", model=str(folder))
    assert small.model == str(folder) and len(small.data[0].embedding) == 128
    with pytest.raises(openai.BadRequestError, match="dimensions"):
        await client.embeddings.create(input="graph leg", model=str(folder), dimensions=256)


@pytest.mark.asyncio
async def test_the_models_are_listed_as_openai_lists_them(vault_brain_path, tmp_path):
    client = client_for(Datasette([str(vault_brain_path)]))
    listed = await client.models.list()
    assert [(m.id, m.object, m.owned_by) for m in listed.data] == [(MODEL, "model", "datasette-brain")]
    assert isinstance(listed.data[0].created, int)
    one = await client.models.retrieve(MODEL)
    assert one.id == MODEL
    with pytest.raises(openai.NotFoundError) as raised:
        await client.models.retrieve("text-embedding-3-small")
    assert raised.value.code == "model_not_found" and MODEL in raised.value.message
    denied = client_for(Datasette([str(vault_brain_path)], metadata={"allow": False}))
    with pytest.raises(openai.PermissionDeniedError):
        await denied.models.list()


@pytest.mark.asyncio
@pytest.mark.parametrize(
    "deny",
    [{"allow": {"id": "admin"}}, {"tables": {"knowledge": {"allow": {"id": "admin"}}}}],
    ids=["database", "knowledge"],
)
async def test_the_models_listed_are_those_of_brains_the_actor_may_read(vault_brain_path, tmp_path, deny):
    """A model only a brain the actor may not read uses is not listed, and asking for
    it is the 404 of a model never served (a 403 would tell that a hidden brain uses
    it); whoever may read that brain sees it."""
    other, folder = brain_of_another_model(tmp_path)
    datasette = Datasette([str(vault_brain_path), str(other)], metadata={"databases": {"other": deny}})
    admin = {"ds_actor": datasette.sign({"a": {"id": "admin"}}, "actor")}
    listed = await datasette.client.get("/-/brain/v1/models")
    assert listed.status_code == 200 and [m["id"] for m in listed.json()["data"]] == [MODEL]
    hidden = await datasette.client.get(f"/-/brain/v1/models/{urllib.parse.quote(str(folder), safe='')}")
    never = await datasette.client.get("/-/brain/v1/models/never-served")
    assert hidden.status_code == never.status_code == 404 and hidden.json()["error"]["code"] == "model_not_found"
    assert str(folder) not in never.text  # the brains' models it lists: only the readable one's
    assert hidden.json()["error"]["message"].replace(str(folder), "never-served") == never.json()["error"]["message"]
    listed = await datasette.client.get("/-/brain/v1/models", cookies=admin)
    assert sorted(m["id"] for m in listed.json()["data"]) == sorted([MODEL, str(folder)])
    shown = await datasette.client.get(f"/-/brain/v1/models/{urllib.parse.quote(str(folder), safe='')}", cookies=admin)
    assert shown.status_code == 200 and shown.json()["id"] == str(folder)


@pytest.mark.asyncio
@pytest.mark.parametrize(
    "change",
    [
        "update brain_meta set value = 'abc' where key = 'schema_version'",
        # review 21, R1: a model check names (not installed here), and a dimension not the vectors'
        "update brain_meta set value = 7 where key = 'model'",
        "update brain_meta set value = '-5' where key = 'dimension'",
    ],
)
async def test_one_damaged_brain_leaves_the_others_model_served(vault_brain_path, tmp_path, change):
    """Review 20, N6: a brain whose schema_version plain SQL made 'abc' answered 409 for
    every brain's /-/brain/v1/models and embeddings: the healthy brain's model is
    still listed and served (the damaged one's own routes say to run check), and the
    official client's default request, which names another model, still answers."""
    damaged = tmp_path / "sv.db"
    shutil.copy(vault_brain_path, damaged)
    conn = brain_sql.connect(damaged)
    with conn:
        conn.execute(change)
    conn.close()
    datasette = Datasette([str(vault_brain_path), str(damaged)])
    listed = await datasette.client.get("/-/brain/v1/models")
    assert listed.status_code == 200 and [m["id"] for m in listed.json()["data"]] == [DEFAULT_MODEL], listed.text
    for model in (DEFAULT_MODEL, "text-embedding-3-small"):
        embedded = await datasette.client.post("/-/brain/v1/embeddings", json={"input": "refund", "model": model})
        assert embedded.status_code == 200, embedded.text
