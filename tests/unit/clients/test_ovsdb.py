"""The OVSDB client's framing, keepalive, errors and timeouts, against a JSON-RPC
peer on a Unix socket in a thread (the real servers: tests/integration/ovn)."""

import json
import socket
import threading
import time

import pytest

from isthmus.clients.ovsdb import OvsdbClient, OvsdbError, OvsdbUnavailable, map_of, omap, oset, set_of


def serve(path, handler):
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    server.listen(1)

    def run():
        conn, _ = server.accept()
        with conn:
            request = json.loads(conn.recv(65536).decode())
            handler(conn, request)
        server.close()

    threading.Thread(target=run, daemon=True).start()
    return f"unix:{path}"


def test_an_answer_in_pieces_after_a_keepalive_is_read_whole(tmp_path):
    seen = {}

    def handler(conn, request):
        seen["request"] = request
        conn.sendall(json.dumps({"method": "echo", "params": [], "id": "echo"}).encode())
        seen["echo"] = json.loads(conn.recv(65536).decode())
        answer = json.dumps({"id": request["id"], "result": [{"rows": [{"name": "a", "options": omap({"k": "v"})}]}],
                             "error": None}).encode()
        for start in range(0, len(answer), 7):
            conn.sendall(answer[start:start + 7])
            time.sleep(0.001)

    client = OvsdbClient(serve(tmp_path / "db.sock", handler), timeout=5)
    rows = client.select("OVN_Northbound", "Logical_Switch_Port", [["name", "==", "a"]], ["name", "options"])
    assert map_of(rows[0]["options"]) == {"k": "v"}
    assert seen["echo"] == {"result": [], "id": "echo"}
    assert seen["request"]["method"] == "transact"
    assert seen["request"]["params"][1]["columns"] == ["name", "options", "_uuid"]


def test_an_operation_error_names_the_table(tmp_path):
    def handler(conn, request):
        conn.sendall(json.dumps({"id": request["id"], "result": [{"error": "constraint violation",
                                                                  "details": "name is not unique"}]}).encode())

    client = OvsdbClient(serve(tmp_path / "db.sock", handler), timeout=5)
    with pytest.raises(OvsdbError, match="insert Logical_Switch_Port: constraint violation: name is not unique"):
        client.transact("OVN_Northbound", [{"op": "insert", "table": "Logical_Switch_Port", "row": {}}])


def test_a_server_that_never_answers_is_unavailable_within_the_timeout(tmp_path):
    def handler(conn, request):
        time.sleep(2)

    client = OvsdbClient(serve(tmp_path / "db.sock", handler), timeout=0.3)
    started = time.monotonic()
    with pytest.raises(OvsdbUnavailable, match="timed out|no answer"):
        client.transact("OVN_Northbound", [])
    assert time.monotonic() - started < 1.5


def test_a_cluster_falls_over_to_the_next_remote(tmp_path):
    def handler(conn, request):
        conn.sendall(json.dumps({"id": request["id"], "result": [{"rows": []}]}).encode())

    live = serve(tmp_path / "live.sock", handler)
    client = OvsdbClient(f"unix:{tmp_path / 'dead.sock'},{live}", timeout=2)
    assert client.select("OVN_Southbound", "Chassis") == []
    with pytest.raises(OvsdbUnavailable, match="dead.sock"):
        OvsdbClient(f"unix:{tmp_path / 'dead.sock'}", timeout=1).select("OVN_Southbound", "Chassis")


def test_values_convert_both_ways():
    assert set_of(["set", [["uuid", "a"], ["uuid", "b"]]]) == ["a", "b"]
    assert set_of(["uuid", "a"]) == ["a"]
    assert set_of(["set", []]) == []
    assert oset(["x"]) == ["set", ["x"]]
    with pytest.raises(ValueError, match="remote"):
        OvsdbClient("")
