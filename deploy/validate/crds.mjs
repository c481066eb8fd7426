// Validates Gateway, HTTPRoute and PodMonitor objects (JSON lines on stdin) with the
// schemas that @kubernetes-models generates from the upstream CRDs' openAPIV3Schema:
// types, required fields, enums and patterns. These validators do not reject unknown fields.
import { createInterface } from "node:readline";
import { Gateway } from "@kubernetes-models/gateway-api/gateway.networking.k8s.io/v1/Gateway";
import { HTTPRoute } from "@kubernetes-models/gateway-api/gateway.networking.k8s.io/v1/HTTPRoute";
import { PodMonitor } from "@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1/PodMonitor";

const models = {
  "gateway.networking.k8s.io/v1/Gateway": Gateway,
  "gateway.networking.k8s.io/v1/HTTPRoute": HTTPRoute,
  "monitoring.coreos.com/v1/PodMonitor": PodMonitor,
};
let failed = 0;
for await (const line of createInterface({ input: process.stdin })) {
  if (!line.trim()) continue;
  const obj = JSON.parse(line);
  const key = `${obj.apiVersion}/${obj.kind}`;
  const Model = models[key];
  if (!Model) { console.log(`FAIL ${key} ${obj.metadata.name}: no validator`); failed++; continue; }
  try { new Model(obj).validate(); console.log(`ok   ${key} ${obj.metadata.name}`); }
  catch (e) { console.log(`FAIL ${key} ${obj.metadata.name}: ${e.message}`); failed++; }
}
process.exit(failed ? 1 : 0);
