"""Where an incident goes: Prometheus (an HTTP endpoint and/or a node_exporter textfile), an
OpenTelemetry log record, and the spool folder the registry reads. Each is optional; the agent's
own health is a metric too."""

from __future__ import annotations

import json
import time
from pathlib import Path

from .. import __version__
from ..private_files import write_private
from .record import IncidentRecord


class Metrics:
    """The agent's metrics, on a registry of their own (never the process-global one)."""

    def __init__(self, node: str):
        from prometheus_client import CollectorRegistry, Counter, Gauge, Info
        self.registry = CollectorRegistry()
        self.node = node
        self.incidents = Counter("faultkit_incidents", "GPU incidents the agent opened",
                                 ["node", "signature", "kind", "gpu", "level", "suspect"], registry=self.registry)
        self.signs = Counter("faultkit_fault_lines", "kernel/runtime log lines that were GPU fault or hang signs",
                             ["node"], registry=self.registry)
        self.last = Gauge("faultkit_last_incident_timestamp_seconds", "when the last incident opened",
                          ["node"], registry=self.registry)
        self.up = Gauge("faultkit_agent_up", "1 while the agent reads every source it was given",
                        ["node"], registry=self.registry)
        self.errors = Counter("faultkit_agent_source_errors", "times a source could not be read",
                              ["node", "source"], registry=self.registry)
        self.lines = Counter("faultkit_agent_lines_read", "log lines the agent read", ["node"], registry=self.registry)
        self.dropped = Counter("faultkit_agent_lines_dropped", "lines not kept in an incident (its bound)",
                               ["node"], registry=self.registry)
        Info("faultkit_agent", "the agent", registry=self.registry).info({"version": __version__, "node": node})
        self.up.labels(node).set(1)
        self.last.labels(node).set(0)

    def incident(self, rec: IncidentRecord | None, kind: str, gpu: str | None, suspect: str) -> None:
        self.incidents.labels(self.node, rec.signature if rec else "", rec.fault_kind if rec else kind,
                              (rec.gpu if rec else gpu) or "", rec.level if rec else "unknown", suspect).inc()
        self.last.labels(self.node).set(time.time())

    def serve(self, port: int, addr: str = "127.0.0.1"):
        from prometheus_client import start_http_server
        return start_http_server(port, addr=addr, registry=self.registry)

    def write_textfile(self, path: str) -> None:
        from prometheus_client import generate_latest
        # through the one writer (atomic, 0600): node_exporter's collector runs as the same user, or
        # is given the folder by its group (deploy/)
        write_private(path, generate_latest(self.registry))


class OtelLogs:
    """One log record per incident through the OpenTelemetry SDK: to an OTLP/HTTP endpoint, or to the
    exporter given (tests read records back from the SDK's in-memory exporter)."""

    def __init__(self, node: str, endpoint: str | None = None, exporter=None):
        from opentelemetry.sdk._logs import LoggerProvider
        from opentelemetry.sdk._logs.export import BatchLogRecordProcessor, SimpleLogRecordProcessor
        from opentelemetry.sdk.resources import Resource
        self.provider = LoggerProvider(resource=Resource.create({"service.name": "faultkit-watch", "host.name": node}))
        if exporter is not None:
            self.provider.add_log_record_processor(SimpleLogRecordProcessor(exporter))
        else:
            from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
            self.provider.add_log_record_processor(BatchLogRecordProcessor(OTLPLogExporter(endpoint=endpoint)))
        self.logger = self.provider.get_logger("faultkit.watch", __version__)

    def incident(self, summary: dict) -> None:
        from opentelemetry._logs import SeverityNumber
        attrs = {f"faultkit.{k}": v for k, v in summary.items()
                 if isinstance(v, (str, int, float, bool)) and k != "line"}
        self.logger.emit(timestamp=int(summary["opened"] * 1e9), severity_number=SeverityNumber.ERROR,
                         severity_text="ERROR", body=summary["line"], attributes=attrs,
                         event_name="faultkit.incident")

    def close(self) -> None:
        self.provider.shutdown()


def private_json(path: Path, data) -> None:
    """Written whole or not at all (a temporary file renamed), readable by its owner alone."""
    write_private(path, json.dumps(data, indent=1, default=str))
