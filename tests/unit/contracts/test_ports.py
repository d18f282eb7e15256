"""contracts/ports.py: picked ports sit below the kernel's ephemeral range, are free when
picked, and a range with no room falls back to the kernel's pick."""

from __future__ import annotations

import socket

import pytest

from contracts import ports


def test_a_picked_port_is_below_the_ephemeral_range_and_bindable():
    low = ports.ephemeral_low()
    for _ in range(20):
        port = ports.free_port()
        assert ports.PICK_LOW <= port < low
        with socket.socket() as s:
            s.bind(("127.0.0.1", port))


def test_a_port_in_use_is_never_picked(monkeypatch):
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        taken = held.getsockname()[1]
        # A range of exactly the attempts' size around the held port: picks keep landing on it.
        monkeypatch.setattr(ports, "PICK_LOW", taken)
        monkeypatch.setattr(ports, "ephemeral_low", lambda: taken + ports.PICK_ATTEMPTS + 1)
        assert all(ports.free_port() != taken for _ in range(50))


def test_the_range_file_is_read_and_an_unreadable_one_means_linux_default(tmp_path):
    f = tmp_path / "range"
    f.write_text("40000\t60999\n")
    assert ports.ephemeral_low(f) == 40000
    f.write_text("garbage")
    assert ports.ephemeral_low(f) == 32768
    assert ports.ephemeral_low(tmp_path / "missing") == 32768


@pytest.mark.parametrize("low", [ports.PICK_LOW, ports.PICK_LOW + 10, 1024])
def test_a_range_with_no_room_below_it_falls_back_to_the_kernel(monkeypatch, low):
    monkeypatch.setattr(ports, "ephemeral_low", lambda: low)
    port = ports.free_port()
    with socket.socket() as s:
        s.bind(("127.0.0.1", port))
    assert port >= 1024
