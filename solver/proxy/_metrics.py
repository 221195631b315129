"""Prometheus text exposition (format 0.0.4) of the proxy's counters: plain dicts, no locks,
since everything runs on the event loop thread."""

from __future__ import annotations

from collections import defaultdict

_TTFB_BUCKETS = (0.005, 0.025, 0.1, 0.5, 1.0, 5.0, 15.0, 60.0, 300.0, float("inf"))


def _labels(names: tuple[str, ...], values: tuple[str, ...]) -> str:
    pairs = ",".join(
        f'{n}="{v.replace(chr(92), chr(92) * 2).replace(chr(34), chr(92) + chr(34))}"'
        for n, v in zip(names, values, strict=True)
    )
    return "{" + pairs + "}" if pairs else ""


class Metrics:
    def __init__(self) -> None:
        self.requests: defaultdict[tuple[str, ...], int] = defaultdict(int)
        self.tokens: defaultdict[tuple[str, ...], int] = defaultdict(int)
        self.cases: defaultdict[tuple[str, ...], int] = defaultdict(int)
        self.pings = 0
        self.failovers = 0
        self.in_flight = 0
        self._ttfb_counts = [0] * len(_TTFB_BUCKETS)
        self._ttfb_sum = 0.0
        self._ttfb_total = 0

    def observe_ttfb(self, seconds: float) -> None:
        self._ttfb_sum += seconds
        self._ttfb_total += 1
        for i, bound in enumerate(_TTFB_BUCKETS):
            if seconds <= bound:
                self._ttfb_counts[i] += 1
                break

    def render(self) -> str:
        lines = [
            "# HELP proxy_requests_total Client requests by front protocol, provider and status.",
            "# TYPE proxy_requests_total counter",
        ]
        names = ("front", "provider", "status")
        for key, value in sorted(self.requests.items()):
            lines.append(f"proxy_requests_total{_labels(names, key)} {value}")
        lines += [
            "# HELP proxy_tokens_total Tokens by provider, model and kind.",
            "# TYPE proxy_tokens_total counter",
        ]
        for key, value in sorted(self.tokens.items()):
            lines.append(f"proxy_tokens_total{_labels(('provider', 'model', 'kind'), key)} {value}")
        lines += [
            "# HELP proxy_normalisations_total Stream edge cases normalised, by catalogue code.",
            "# TYPE proxy_normalisations_total counter",
        ]
        for key, value in sorted(self.cases.items()):
            lines.append(f"proxy_normalisations_total{_labels(('case',), key)} {value}")
        lines += [
            "# HELP proxy_pings_total Keepalive pings sent while the upstream was silent.",
            "# TYPE proxy_pings_total counter",
            f"proxy_pings_total {self.pings}",
            "# HELP proxy_failovers_total Requests moved to the next provider before any output.",
            "# TYPE proxy_failovers_total counter",
            f"proxy_failovers_total {self.failovers}",
            "# HELP proxy_in_flight Client requests being served.",
            "# TYPE proxy_in_flight gauge",
            f"proxy_in_flight {self.in_flight}",
            "# HELP proxy_ttfb_seconds Time from request to the first model output sent.",
            "# TYPE proxy_ttfb_seconds histogram",
        ]
        cumulative = 0
        for bound, count in zip(_TTFB_BUCKETS, self._ttfb_counts, strict=True):
            cumulative += count
            le = "+Inf" if bound == float("inf") else repr(bound)
            lines.append(f'proxy_ttfb_seconds_bucket{{le="{le}"}} {cumulative}')
        lines.append(f"proxy_ttfb_seconds_sum {self._ttfb_sum}")
        lines.append(f"proxy_ttfb_seconds_count {self._ttfb_total}")
        return "\n".join(lines) + "\n"
