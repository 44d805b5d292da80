#!/usr/bin/env python3
"""Mapped partitions on transition days, from Python's zoneinfo alone.

For each zone given and each local date from FROM to TO on which the
zone's offset changes (and the day after), prints one JSON line:

  {"zone", "day", "start", "end",       the day's bounds (Unix seconds)
   "hours": [keys],                     the hourly partitions inside it
   "trailing24": [keys],                the 24 hourly partitions ending with its last
   "week": [keys], "month": [keys]}     the days of its ISO week and of its month

by the partition rules of DESIGN.md: a day starts at the first instant
whose local date reaches it (so a skipped date has no day); an hourly
boundary lies where the local (date, hour) changes, or where the clock is
set back onto a whole hour. Nothing here knows the Go code.

Usage: maporacle.py FROM TO ZONE...
"""
import functools
import json
import sys
from datetime import date, datetime, timedelta, timezone
from zoneinfo import ZoneInfo

UTC = timezone.utc


def local(z, u):
    return datetime.fromtimestamp(u, UTC).astimezone(z)


@functools.lru_cache(maxsize=None)
def first_instant(z, d):
    """The first instant (Unix seconds) whose local date is d or later:
    from the instant Python gives local midnight, quarter hours back or
    forward to the change of date, then bisected to the second."""
    u = int(datetime(d.year, d.month, d.day, tzinfo=z).timestamp())
    if local(z, u).date() >= d:
        while local(z, u - 900).date() >= d:
            u -= 900
    else:
        while local(z, u).date() < d:
            u += 900
    lo = u - 900  # local(lo) is before d, local(u) on or after it
    while u - lo > 1:
        mid = (lo + u) // 2
        if local(z, mid).date() >= d:
            u = mid
        else:
            lo = mid
    return u


def hour_key(z, u):
    t = local(z, u)
    off = t.utcoffset()
    if off == timedelta(0):
        suffix = "Z"
    else:
        sign = "+" if off > timedelta(0) else "-"
        m = abs(int(off.total_seconds())) // 60
        suffix = "%s%02d:%02d" % (sign, m // 60, m % 60)
    return t.strftime("%Y-%m-%dT%H:%M") + suffix


def hours(z, start, end):
    """Starts of the hourly partitions in [start, end), start a boundary.

    Samples the UTC quarter hours (every offset of these zones from 1972 is
    a whole number of quarter hours, so every whole local hour lies on
    one), and every minute between two samples whose offsets differ
    (transitions are whole minutes: St. John's used 00:01)."""
    out = [start]
    prev = local(z, start)
    u = start
    while True:
        nxt = (u // 900 + 1) * 900
        if nxt >= end:
            break
        t = local(z, nxt)
        samples = [nxt]
        if t.utcoffset() != prev.utcoffset():
            samples = range(u + 60, nxt + 1, 60)
        for v in samples:
            t = local(z, v)
            back = t.replace(tzinfo=None) <= prev.replace(tzinfo=None)
            if (t.date(), t.hour) != (prev.date(), prev.hour) or (back and t.minute == 0):
                out.append(v)
            prev = t
        u = nxt
    return out


def day_partition(z, d):
    """The day partition holding local date d: its key and bounds."""
    s = first_instant(z, d)
    nxt = d + timedelta(days=1)
    e = first_instant(z, nxt)
    while e == s:  # a skipped date has no partition
        nxt += timedelta(days=1)
        e = first_instant(z, nxt)
    return s, e


def days_between(z, d0, d1):
    """Keys of the day partitions whose dates lie in [d0, d1]."""
    keys = []
    d = d0
    while d <= d1:
        if first_instant(z, d) < first_instant(z, d + timedelta(days=1)):
            keys.append(d.isoformat())
        d += timedelta(days=1)
    return keys


def main():
    lo, hi = date.fromisoformat(sys.argv[1]), date.fromisoformat(sys.argv[2])
    for name in sys.argv[3:]:
        z = ZoneInfo(name)
        days = set()
        d = lo
        prev = datetime(d.year, d.month, d.day, 12, tzinfo=z).utcoffset()
        while d <= hi:
            nd = d + timedelta(days=1)
            off = datetime(nd.year, nd.month, nd.day, 12, tzinfo=z).utcoffset()
            if off != prev:
                days.update([d, nd])
            prev = off
            d = nd
        for d in sorted(days):
            s = first_instant(z, d)
            if first_instant(z, d + timedelta(days=1)) == s:
                continue  # skipped
            s, e = day_partition(z, d)
            hs = hours(z, s, e)
            ps, _ = day_partition(z, d - timedelta(days=1))
            before = hours(z, ps, s)
            monday = d - timedelta(days=d.weekday())
            first = d.replace(day=1)
            last = (first.replace(day=28) + timedelta(days=4)).replace(day=1) - timedelta(days=1)
            print(json.dumps({
                "zone": name, "day": d.isoformat(), "start": s, "end": e,
                "hours": [hour_key(z, u) for u in hs],
                "trailing24": [hour_key(z, u) for u in (before + hs)[-24:]],
                "week": days_between(z, monday, monday + timedelta(days=6)),
                "month": days_between(z, first, last),
            }))


if __name__ == "__main__":
    main()
