"""Validates rendered manifests (deploy/check.sh): built-in kinds with kubernetes-validate
(strict: unknown fields are errors) against one pinned Kubernetes version, Gateway API and
Prometheus Operator kinds through crds.mjs (schemas generated from the upstream CRDs, shipped
on npm), and the GIE / llm-d kinds against the hand-written schemas below, because no package
registry ships theirs. Usage: validate.py K8S_VERSION RENDERED.yaml... (exit 1 on any failure).
"""
import json
import subprocess
import sys
from pathlib import Path

import jsonschema
import kubernetes_validate
import yaml

HERE = Path(__file__).resolve().parent
NODE_KINDS = {
    "gateway.networking.k8s.io/v1/Gateway",
    "gateway.networking.k8s.io/v1/HTTPRoute",
    "monitoring.coreos.com/v1/PodMonitor",
}


def obj(props, required=(), extra=False):
    return {"type": "object", "properties": props, "required": list(required),
            "additionalProperties": extra}


STR = {"type": "string"}
NAME = {"type": "string", "minLength": 1, "maxLength": 253}
PORT = {"type": "integer", "minimum": 1, "maximum": 65535}
META = {"type": "object", "required": ["name"]}

# Transcribed by hand from the CRD of GIE v1.5.0 (identical in v1.6.0),
# config/crd/bases/inference.networking.k8s.io_inferencepools.yaml: field names, types,
# required fields, enums, maxItems. Not transcribed: patterns, CEL rules other than
# "port is required when kind is Service".
INFERENCE_POOL = obj({
    "apiVersion": {"const": "inference.networking.k8s.io/v1"},
    "kind": {"const": "InferencePool"},
    "metadata": META,
    "spec": obj({
        "selector": obj({"matchLabels": {"type": "object", "minProperties": 1,
                                         "additionalProperties": STR}}, ["matchLabels"]),
        "targetPorts": {"type": "array", "minItems": 1, "maxItems": 8,
                        "items": obj({"number": PORT}, ["number"])},
        "appProtocol": {"enum": ["http", "kubernetes.io/h2c"]},
        "endpointPickerRef": {
            **obj({"group": STR, "kind": STR, "name": NAME,
                   "port": obj({"number": PORT}, ["number"]),
                   "failureMode": {"enum": ["FailOpen", "FailClose"]}}, ["name"]),
            # CEL: self.kind != 'Service' || has(self.port)   (kind defaults to Service)
            "if": {"not": {"required": ["kind"]}},
            "then": {"required": ["port"]},
        },
    }, ["selector", "targetPorts"]),
}, ["apiVersion", "kind", "metadata", "spec"], extra=True)

# From GIE v1.5.0 config/crd/bases/inference.networking.x-k8s.io_inferenceobjectives.yaml.
INFERENCE_OBJECTIVE = obj({
    "apiVersion": {"const": "inference.networking.x-k8s.io/v1alpha2"},
    "kind": {"const": "InferenceObjective"},
    "metadata": META,
    "spec": obj({
        "priority": {"type": "integer"},
        "poolRef": obj({"group": STR, "kind": STR, "name": NAME}, ["name"]),
    }, ["poolRef"]),
}, ["apiVersion", "kind", "metadata", "spec"], extra=True)

# The top level of EndpointPickerConfig from llm-d-inference-scheduler v0.8.0
# (apix/config/v1alpha1/endpointpickerconfig_types.go). Plugin `parameters` are free-form
# there (json.RawMessage, parsed by each plugin), so only the keys this file relies on are
# checked for the precise-prefix-cache-scorer (llm-d-kv-cache v0.7.1 config structs).
PLUGIN_REF = obj({"pluginRef": STR, "weight": {"type": "number"}}, ["pluginRef"])
EPP_CONFIG = obj({
    "apiVersion": {"enum": ["inference.networking.x-k8s.io/v1alpha1", "llm-d.ai/v1alpha1"]},
    "kind": {"const": "EndpointPickerConfig"},
    "featureGates": {"type": "array", "items": STR},
    "plugins": {"type": "array", "minItems": 1, "items": obj(
        {"name": STR, "type": STR, "parameters": {"type": "object"}}, ["type"])},
    "schedulingProfiles": {"type": "array", "minItems": 1, "items": obj(
        {"name": STR, "plugins": {"type": "array", "items": PLUGIN_REF}}, ["name", "plugins"])},
    "saturationDetector": {"type": "object"},
    "flowControl": {"type": "object"},
    "parser": {"type": "object"},
    "dataLayer": obj({"sources": {"type": "array", "items": obj(
        {"pluginRef": STR, "extractors": {"type": "array", "items": obj(
            {"pluginRef": STR}, ["pluginRef"])}}, ["pluginRef", "extractors"])}}),
}, ["apiVersion", "kind", "plugins", "schedulingProfiles"])
PRECISE_PARAMS = obj({
    "tokenProcessorConfig": obj({"blockSize": {"type": "integer", "minimum": 1},
                                 "hashSeed": STR}),
    "kvEventsConfig": obj({
        "zmqEndpoint": STR, "topicFilter": STR, "concurrency": {"type": "integer"},
        "engineType": {"enum": ["vllm", "sglang"]}, "discoverPods": {"type": "boolean"},
        "podDiscoveryConfig": obj({"podLabelSelector": STR, "podNamespace": STR,
                                   "socketPort": PORT})}),
    "indexerConfig": obj({"kvBlockIndexConfig": {"type": "object"},
                          "tokenizersPoolConfig": {"type": "object"},
                          "kvCacheBackendConfigs": {}}),
})

HAND_WRITTEN = {
    "inference.networking.k8s.io/v1/InferencePool": INFERENCE_POOL,
    "inference.networking.x-k8s.io/v1alpha2/InferenceObjective": INFERENCE_OBJECTIVE,
}


def check_schema(schema, doc):
    errors = sorted(jsonschema.Draft202012Validator(schema).iter_errors(doc), key=str)
    return ["%s: %s" % ("/".join(map(str, e.absolute_path)) or "(root)", e.message)
            for e in errors]


def check_epp_config(doc):
    errors = check_schema(EPP_CONFIG, doc)
    names = {p.get("name") or p["type"] for p in doc.get("plugins", [])}
    for profile in doc.get("schedulingProfiles", []):
        for ref in profile.get("plugins", []):
            if ref["pluginRef"] not in names:
                errors.append("schedulingProfiles: unknown pluginRef " + ref["pluginRef"])
    for p in doc.get("plugins", []):
        if p["type"] == "precise-prefix-cache-scorer":
            errors += check_schema(PRECISE_PARAMS, p.get("parameters", {}))
    return errors


def main():
    version, files = sys.argv[1], sys.argv[2:]
    failures, node_docs = 0, []

    def report(what, errors):
        nonlocal failures
        if errors:
            failures += 1
            for e in errors:
                print(f"FAIL {what}: {e}")
        else:
            print(f"ok   {what}")

    for f in files:
        print(f"--- {f}")
        for doc in yaml.safe_load_all(Path(f).read_text()):
            if not doc:
                continue
            key = f"{doc['apiVersion']}/{doc['kind']}"
            what = f"{key} {doc['metadata']['name']}"
            if key in NODE_KINDS:
                node_docs.append(doc)
            elif key in HAND_WRITTEN:
                report(what + " (hand-written schema)", check_schema(HAND_WRITTEN[key], doc))
            else:
                try:
                    kubernetes_validate.validate(doc, version, strict=True)
                    errors = []
                except kubernetes_validate.ValidationError as e:
                    errors = [str(e).splitlines()[0]]
                except kubernetes_validate.SchemaNotFoundError:
                    errors = [f"no schema for {key} in Kubernetes {version}"]
                report(what, errors)
                # The EPP's configuration rides in a ConfigMap: validate it too.
                if doc["kind"] == "ConfigMap":
                    for name, text in doc.get("data", {}).items():
                        inner = yaml.safe_load(text)
                        if isinstance(inner, dict) and inner.get("kind") == "EndpointPickerConfig":
                            report(f"EndpointPickerConfig {doc['metadata']['name']}/{name} "
                                   "(hand-written schema)", check_epp_config(inner))
    if node_docs:
        lines = "".join(json.dumps(d) + "\n" for d in node_docs)
        r = subprocess.run(["node", str(HERE / "crds.mjs")], input=lines, text=True,
                           capture_output=True, cwd=HERE)
        print(r.stdout + r.stderr, end="")
        failures += r.returncode != 0
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
