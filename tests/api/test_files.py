"""The images of conversations on the server, over HTTP against the
runner's real local R2 bucket (``FILES``) and D1 (``DB``): uploads and
reads, every limit, who may read what, the copies a share link made with
``"images": true`` shows, and what goes with a conversation or with my data.

Two named keys are two users; each test starts from an empty account
(``DELETE /api/my-data``), so the limits count only its own images.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.api.checks import assert_error
from tests.api.conftest import ClientFactory, Server, ServerPool, token_client
from tests.api.test_history import conversation, fresh_id
from tests.kit.images import gif, jpeg, png

ANN = "ann-token-5d0e3b8a1f6c2947"
BOB = "bob-token-e2a9c47f10b65d38"
MAX_FILE_BYTES = 2000
MAX_FILES_BYTES = 5000
MAX_FILES = 4
MAX_SHARE_IMAGES = 2


@pytest.fixture
def server(servers: ServerPool) -> Server:
    return servers.get(
        {
            "API_KEYS": f"ann:{ANN},bob:{BOB}",
            "MAX_FILE_BYTES": str(MAX_FILE_BYTES),
            "MAX_FILES_BYTES": str(MAX_FILES_BYTES),
            "MAX_FILES": str(MAX_FILES),
            "MAX_SHARE_IMAGES": str(MAX_SHARE_IMAGES),
        }
    )


def emptied(client: httpx.Client) -> httpx.Client:
    wiped = client.delete("/api/my-data", headers={"if-match": "*"})
    assert wiped.status_code == 204, wiped.text
    return client


@pytest.fixture
def ann(new_client: ClientFactory, server: Server) -> httpx.Client:
    return emptied(token_client(new_client, server, ANN))


@pytest.fixture
def bob(new_client: ClientFactory, server: Server) -> httpx.Client:
    return emptied(token_client(new_client, server, BOB))


def put_image(
    client: httpx.Client, fid: str, data: bytes, kind: str = "image/png"
) -> httpx.Response:
    return client.put(f"/api/files/{fid}", content=data, headers={"content-type": kind})


def upload(client: httpx.Client, fid: str, data: bytes, kind: str = "image/png") -> None:
    made = put_image(client, fid, data, kind)
    assert made.status_code == 201, made.text


def with_images(cid: str, *images: tuple[str, str, int, int]) -> dict[str, Any]:
    """A conversation whose question names ``images`` (id, type, width, height)."""
    body = conversation(cid, "What is this?", "A black square.")
    named = [{"id": fid, "type": kind, "width": w, "height": h} for fid, kind, w, h in images]
    body["nodes"][0]["images"] = named
    return body


def keep(client: httpx.Client, cid: str, *images: tuple[str, str, int, int]) -> str:
    made = client.put(
        f"/api/conversations/{cid}", json=with_images(cid, *images), headers={"if-none-match": "*"}
    )
    assert made.status_code == 201, made.text
    return made.headers["etag"]


def delete_conversation(client: httpx.Client, cid: str, tag: str) -> None:
    gone = client.delete(f"/api/conversations/{cid}", headers={"if-match": tag})
    assert gone.status_code == 200, gone.text


def assert_image(response: httpx.Response, data: bytes, kind: str) -> None:
    assert response.status_code == 200, response.text
    assert response.content == data
    assert response.headers["content-type"] == kind
    assert response.headers["x-content-type-options"] == "nosniff"


def assert_gone_page(response: httpx.Response) -> None:
    """What a link's image URL gives once there is nothing to show: the
    share page's own "no such link", HTML, never an image."""
    assert response.status_code == 404, response.status_code
    assert response.headers["content-type"].startswith("text/html")
    assert "does not exist" in response.text


SQUARE = ("a", "image/png", 4, 3)
PHOTO = ("b", "image/jpeg", 5, 6)


def test_an_image_is_uploaded_replaced_and_read_back_by_its_owner(ann: httpx.Client) -> None:
    first = png(4, 3)
    made = put_image(ann, "pic-1", first)
    assert made.status_code == 201
    assert made.headers["content-type"].startswith("application/json")
    assert made.json() == {
        "id": "pic-1",
        "type": "image/png",
        "width": 4,
        "height": 3,
        "bytes": len(first),
    }
    got = ann.get("/api/files/pic-1")
    assert_image(got, first, "image/png")
    assert got.headers["cache-control"] == "private"
    assert got.headers["content-length"] == str(len(first))

    second = jpeg(7, 9)
    replaced = put_image(ann, "pic-1", second, "image/jpeg; charset=binary")
    assert replaced.status_code == 200
    assert replaced.json() == {
        "id": "pic-1",
        "type": "image/jpeg",
        "width": 7,
        "height": 9,
        "bytes": len(second),
    }
    assert_image(ann.get("/api/files/pic-1"), second, "image/jpeg")
    assert_error(ann.get("/api/files/never-uploaded"), 404, "not_found")


def test_an_upload_must_say_its_type_and_be_that_type(ann: httpx.Client) -> None:
    for headers in ({"content-type": "text/plain"}, {"content-type": "image/svg+xml"}, {}):
        refused = ann.put("/api/files/x", content=png(4, 3), headers=headers)
        assert_error(refused, 415, "unsupported_media_type")
        assert "image/png" in refused.json()["error"]["message"]
    for data, kind in (
        (gif(4, 3), "image/png"),
        (png(4, 3), "image/jpeg"),
        (png(4, 3)[:20], "image/png"),
        (b"not an image at all", "image/webp"),
    ):
        assert_error(put_image(ann, "x", data, kind), 400, "invalid_request")
    assert_error(ann.get("/api/files/x"), 404, "not_found")
    assert ann.get("/api/my-data").json()["files"] == []


def test_an_image_over_max_file_bytes_is_refused_declared_or_counted(ann: httpx.Client) -> None:
    big = jpeg(8, 8, exif_bytes=MAX_FILE_BYTES)
    assert len(big) > MAX_FILE_BYTES

    def chunks() -> Iterator[bytes]:
        # No Content-Length: the limit is counted as the body arrives.
        for start in range(0, len(big), 512):
            yield big[start : start + 512]

    jpeg_close = {"content-type": "image/jpeg", "connection": "close"}
    for body in (big, chunks()):
        refused = ann.put("/api/files/big", content=body, headers=jpeg_close)
        assert_error(refused, 413, "file_too_large")
        error = refused.json()["error"]
        assert (error["limit"], error["max"]) == ("max_file_bytes", MAX_FILE_BYTES)
    assert_error(ann.get("/api/files/big"), 404, "not_found")
    fits = jpeg(8, 8, exif_bytes=MAX_FILE_BYTES - 200)
    assert len(fits) <= MAX_FILE_BYTES
    upload(ann, "fits", fits, "image/jpeg")


def test_a_users_images_are_held_to_max_files_and_max_files_bytes(ann: httpx.Client) -> None:
    for k in range(MAX_FILES):
        upload(ann, f"n{k}", png(4, 3))
    over = put_image(ann, "one-more", png(4, 3))
    assert_error(over, 409, "too_many_files")
    assert (over.json()["error"]["limit"], over.json()["error"]["max"]) == ("max_files", MAX_FILES)
    assert put_image(ann, "n0", png(5, 5)).status_code == 200  # a replacement is no new image
    assert_error(ann.get("/api/files/one-more"), 404, "not_found")

    emptied(ann)
    heavy = jpeg(8, 8, exif_bytes=1800)
    for fid in ("h1", "h2"):
        upload(ann, fid, heavy, "image/jpeg")
    full = put_image(ann, "h3", heavy, "image/jpeg")
    assert_error(full, 413, "files_full")
    error = full.json()["error"]
    assert (error["limit"], error["max"]) == ("max_files_bytes", MAX_FILES_BYTES)
    # Replacing one with a smaller image makes room.
    assert put_image(ann, "h1", png(4, 3)).status_code == 200
    upload(ann, "h3", heavy, "image/jpeg")


def test_a_bad_image_id_is_refused(ann: httpx.Client) -> None:
    for path in ("/api/files/a%20b", "/api/files/" + "x" * 101, "/api/files/%C3%A9"):
        assert_error(
            put_image(ann, path.removeprefix("/api/files/"), png(4, 3)), 400, "invalid_request"
        )
        assert_error(ann.get(path), 400, "invalid_request")


def test_without_identity_images_stay_in_the_browser(
    servers: ServerPool, new_client: ClientFactory
) -> None:
    anonymous = new_client(servers.get({"MAX_FILES": str(MAX_FILES)}).url)
    for response in (
        put_image(anonymous, "a", png(4, 3)),
        anonymous.get("/api/files/a"),
    ):
        assert_error(response, 403, "sign_in_required")


def test_another_users_images_are_neither_read_nor_overwritten(
    ann: httpx.Client, bob: httpx.Client
) -> None:
    hers = png(4, 3)
    upload(ann, "private", hers)
    assert_error(bob.get("/api/files/private"), 404, "not_found")
    # Bob's image of the same id is a new one of his own.
    his = jpeg(6, 6)
    assert put_image(bob, "private", his, "image/jpeg").status_code == 201
    assert_image(bob.get("/api/files/private"), his, "image/jpeg")
    assert_image(ann.get("/api/files/private"), hers, "image/png")
    assert [f["id"] for f in bob.get("/api/my-data").json()["files"]] == ["private"]
    emptied(bob)
    assert_image(ann.get("/api/files/private"), hers, "image/png")


def test_a_share_with_images_shows_its_own_copies_to_anyone(
    ann: httpx.Client, server: Server
) -> None:
    square, photo = png(4, 3), jpeg(5, 6)
    upload(ann, "a", square)
    upload(ann, "b", photo, "image/jpeg")
    cid = fresh_id()
    # "c" was never uploaded (a page that went away mid-upload, say).
    tag = keep(ann, cid, SQUARE, PHOTO, ("c", "image/png", 2, 2))
    made = ann.post("/api/shares", json={"conversation": cid, "images": True})
    assert made.status_code == 201, made.text
    link = made.json()
    assert link["images"] == 2
    sid = link["id"]

    page = httpx.get(server.url + link["url"])
    assert page.status_code == 200
    assert "img-src 'self'" in page.headers["content-security-policy"]
    assert "script-src" not in page.headers["content-security-policy"]
    assert f'<img src="/s/{sid}/images/a" alt="" width="4" height="3">' in page.text
    assert f'<img src="/s/{sid}/images/b" alt="" width="5" height="6">' in page.text
    assert page.text.count("<img") == 2  # none for what the server never held
    # No identity at all: the link is the key.
    shown = httpx.get(server.url + f"/s/{sid}/images/a")
    assert_image(shown, square, "image/png")
    assert shown.headers["referrer-policy"] == "no-referrer"
    assert_image(httpx.get(server.url + f"/s/{sid}/images/b"), photo, "image/jpeg")
    assert_gone_page(httpx.get(server.url + f"/s/{sid}/images/c"))

    # The conversation deleted, its images with it; a new image of the same
    # id: the link still shows what was shared.
    delete_conversation(ann, cid, tag)
    assert_error(ann.get("/api/files/a"), 404, "not_found")
    assert_error(ann.get("/api/files/b"), 404, "not_found")
    upload(ann, "a", png(9, 9))
    assert_image(httpx.get(server.url + f"/s/{sid}/images/a"), square, "image/png")
    assert_image(httpx.get(server.url + f"/s/{sid}/images/b"), photo, "image/jpeg")
    assert_image(ann.get("/api/files/a"), png(9, 9), "image/png")

    assert ann.delete(f"/api/shares/{sid}").status_code == 204
    assert httpx.get(server.url + link["url"]).status_code == 410
    for fid in ("a", "b"):
        assert_gone_page(httpx.get(server.url + f"/s/{sid}/images/{fid}"))
    # Only the image of the same id uploaded later is left: 1 of 1.
    assert [f["id"] for f in ann.get("/api/my-data").json()["files"]] == ["a"]


def test_a_share_without_images_shows_none(ann: httpx.Client, server: Server) -> None:
    upload(ann, "a", png(4, 3))
    cid = fresh_id()
    keep(ann, cid, SQUARE)
    for body in ({"conversation": cid}, {"conversation": cid, "images": False}):
        made = ann.post("/api/shares", json=body)
        assert made.status_code == 201, made.text
        link = made.json()
        assert "images" not in link
        page = httpx.get(server.url + link["url"])
        assert page.status_code == 200
        assert "<img" not in page.text
        assert "img-src" not in page.headers["content-security-policy"]
        assert_gone_page(httpx.get(server.url + f"/s/{link['id']}/images/a"))
    refused = ann.post("/api/shares", json={"conversation": cid, "images": "yes"})
    assert_error(refused, 400, "invalid_request")
    assert "images must be true or false" in refused.json()["error"]["message"]


def test_a_share_of_more_than_max_share_images_is_refused_and_not_made(
    ann: httpx.Client,
) -> None:
    for fid in ("a", "b", "c"):
        upload(ann, fid, png(4, 3))
    cid = fresh_id()
    keep(ann, cid, SQUARE, ("b", "image/png", 4, 3), ("c", "image/png", 4, 3))
    refused = ann.post("/api/shares", json={"conversation": cid, "images": True})
    assert_error(refused, 409, "too_many_share_images")
    error = refused.json()["error"]
    assert (error["limit"], error["max"]) == ("max_share_images", MAX_SHARE_IMAGES)
    assert ann.get("/api/shares").json()["shares"] == []
    assert len(ann.get("/api/my-data").json()["files"]) == 3
    # Without its images the same conversation is shared.
    assert ann.post("/api/shares", json={"conversation": cid}).status_code == 201


def test_a_shares_copies_count_against_the_users_limits(ann: httpx.Client) -> None:
    upload(ann, "a", png(4, 3))
    upload(ann, "b", png(4, 3))
    cid = fresh_id()
    keep(ann, cid, SQUARE, ("b", "image/png", 4, 3))
    first = ann.post("/api/shares", json={"conversation": cid, "images": True})
    assert first.json()["images"] == 2
    # Two images and two copies: MAX_FILES is reached.
    over = ann.post("/api/shares", json={"conversation": cid, "images": True})
    assert_error(over, 409, "too_many_files")
    assert [s["id"] for s in ann.get("/api/shares").json()["shares"]] == [first.json()["id"]]
    assert_error(put_image(ann, "c", png(4, 3)), 409, "too_many_files")


def test_a_deleted_conversations_images_go_unless_another_names_them(
    ann: httpx.Client,
) -> None:
    upload(ann, "a", png(4, 3))
    upload(ann, "b", jpeg(5, 6), "image/jpeg")
    upload(ann, "loose", png(2, 2))
    one, two = fresh_id(), fresh_id()
    tag = keep(ann, one, SQUARE, PHOTO)
    keep(ann, two, PHOTO)
    delete_conversation(ann, one, tag)
    assert_error(ann.get("/api/files/a"), 404, "not_found")
    assert_image(ann.get("/api/files/b"), jpeg(5, 6), "image/jpeg")
    # An image no conversation named is not the deleted one's.
    assert_image(ann.get("/api/files/loose"), png(2, 2), "image/png")


def test_my_data_lists_every_image_and_deleting_it_takes_them_all(
    ann: httpx.Client, bob: httpx.Client, server: Server
) -> None:
    upload(ann, "a", png(4, 3))
    upload(ann, "b", jpeg(5, 6), "image/jpeg")
    upload(bob, "a", png(8, 8))
    cid = fresh_id()
    keep(ann, cid, SQUARE)
    link = ann.post("/api/shares", json={"conversation": cid, "images": True}).json()
    exported = ann.get("/api/my-data").json()
    listed = {f["id"]: f for f in exported["files"]}
    assert sorted(listed) == ["a", "b"]
    assert {k: v for k, v in listed["b"].items() if k != "created"} == {
        "id": "b",
        "type": "image/jpeg",
        "width": 5,
        "height": 6,
        "bytes": len(jpeg(5, 6)),
    }
    assert isinstance(listed["a"]["created"], int)
    assert_image(httpx.get(server.url + f"/s/{link['id']}/images/a"), png(4, 3), "image/png")

    emptied(ann)
    assert ann.get("/api/my-data").json()["files"] == []
    for fid in ("a", "b"):
        assert_error(ann.get(f"/api/files/{fid}"), 404, "not_found")
    assert_gone_page(httpx.get(server.url + f"/s/{link['id']}/images/a"))
    assert httpx.get(server.url + link["url"]).status_code == 404
    assert_image(bob.get("/api/files/a"), png(8, 8), "image/png")
