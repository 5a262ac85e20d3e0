"""Writes the real-world-shaped schema corpus (`*.json` next to this file); see README.md.

Hand-written in the shapes people publish (OpenAPI components, Kubernetes CRD fragments,
function-calling tools, SchemaStore-style config fragments, draft-specific idioms) plus the
`model_json_schema()` output of pydantic models. Rerun after editing:
`python tests/data/real-world-schemas/generate.py` (pydantic 2.x; its output is checked in, so the
tests never depend on the installed pydantic version).
"""

from __future__ import annotations

import datetime as dt
import enum
import json
import uuid
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, Field

HERE = Path(__file__).parent
D4 = "http://json-schema.org/draft-04/schema#"
D6 = "http://json-schema.org/draft-06/schema#"
D7 = "http://json-schema.org/draft-07/schema#"
D2019 = "https://json-schema.org/draft/2019-09/schema"
D2020 = "https://json-schema.org/draft/2020-12/schema"

S: dict[str, object] = {}

# --- OpenAPI 3.0 components ---------------------------------------------------------------------
S["openapi-pet"] = {
    "type": "object",
    "required": ["name", "photoUrls"],
    "properties": {
        "id": {"type": "integer", "format": "int64", "example": 10, "readOnly": True},
        "name": {"type": "string", "example": "doggie"},
        "category": {
            "type": "object",
            "properties": {
                "id": {"type": "integer", "format": "int64"},
                "name": {"type": "string"},
            },
            "xml": {"name": "category"},
        },
        "photoUrls": {
            "type": "array",
            "xml": {"wrapped": True},
            "items": {"type": "string", "xml": {"name": "photoUrl"}},
        },
        "status": {
            "type": "string",
            "description": "pet status in the store",
            "enum": ["available", "pending", "sold"],
        },
    },
    "xml": {"name": "pet"},
}
S["openapi-order"] = {
    "type": "object",
    "properties": {
        "id": {"type": "integer", "format": "int64", "example": 10},
        "petId": {"type": "integer", "format": "int64", "example": 198772},
        "quantity": {"type": "integer", "format": "int32", "example": 7},
        "shipDate": {"type": "string", "format": "date-time"},
        "status": {"type": "string", "enum": ["placed", "approved", "delivered"]},
        "complete": {"type": "boolean", "default": False},
    },
}
S["openapi-error"] = {
    "type": "object",
    "required": ["code", "message"],
    "properties": {
        "code": {"type": "integer", "minimum": 100, "maximum": 599},
        "message": {"type": "string", "maxLength": 200},
        "details": {"type": "string", "nullable": True},
    },
    "additionalProperties": False,
}
S["openapi-address"] = {
    "type": "object",
    "description": "Postal address",
    "properties": {
        "street": {"type": "string", "example": "437 Lytton"},
        "city": {"type": "string", "example": "Palo Alto"},
        "state": {"type": "string", "minLength": 2, "maxLength": 2, "example": "CA"},
        "zip": {"type": "string", "pattern": "^[0-9]{5}(-[0-9]{4})?$", "example": "94301"},
        "country": {"type": "string", "default": "US"},
    },
    "required": ["city", "country"],
}
S["openapi-pagination"] = {
    "type": "object",
    "properties": {
        "page": {"type": "integer", "minimum": 1, "default": 1},
        "per_page": {"type": "integer", "minimum": 1, "maximum": 100, "default": 30},
        "total": {"type": "integer", "minimum": 0, "readOnly": True},
        "next": {"type": "string", "format": "uri", "nullable": True},
    },
    "required": ["page", "per_page"],
}
S["openapi-invoice-line"] = {
    "type": "object",
    "title": "InvoiceLine",
    "properties": {
        "sku": {"type": "string", "pattern": "^[A-Z]{3}-[0-9]{4}$"},
        "description": {"type": "string", "maxLength": 80},
        "quantity": {"type": "integer", "minimum": 1, "maximum": 10000},
        "unit_price": {"type": "number", "minimum": 0, "exclusiveMaximum": 1000000},
        "currency": {"type": "string", "enum": ["USD", "EUR", "GBP", "JPY"]},
        "tax_rate": {"type": "number", "minimum": 0, "maximum": 1},
    },
    "required": ["sku", "quantity", "unit_price", "currency"],
    "additionalProperties": False,
}
S["openapi-user"] = {
    "type": "object",
    "properties": {
        "id": {"type": "string", "format": "uuid", "readOnly": True},
        "username": {"type": "string", "pattern": "^[a-z0-9_]{3,16}$"},
        "email": {"type": "string", "format": "email"},
        "role": {"type": "string", "enum": ["admin", "editor", "viewer"], "default": "viewer"},
        "createdAt": {"type": "string", "format": "date-time", "readOnly": True},
        "password": {"type": "string", "writeOnly": True, "minLength": 8, "maxLength": 64},
    },
    "required": ["username", "email"],
    "externalDocs": {"url": "https://example.com/docs/user"},
}
S["openapi-webhook-event"] = {
    "type": "object",
    "properties": {
        "event": {"type": "string", "enum": ["created", "updated", "deleted"]},
        "occurred_at": {"type": "string", "format": "date-time"},
        "resource": {
            "type": "object",
            "properties": {
                "type": {"type": "string", "enum": ["order", "customer"]},
                "id": {"type": "string"},
            },
            "required": ["type", "id"],
        },
        "attempt": {"type": "integer", "minimum": 1, "maximum": 10},
    },
    "required": ["event", "occurred_at", "resource"],
    "discriminator": {"propertyName": "event"},
}
S["openapi-money"] = {
    "type": "object",
    "properties": {
        "amount": {"type": "string", "pattern": "^-?[0-9]+(\\.[0-9]{1,2})?$"},
        "currency": {"type": "string", "pattern": "^[A-Z]{3}$"},
    },
    "required": ["amount", "currency"],
    "additionalProperties": False,
    "x-stripe-resource": "money",
}
S["openapi-tag-list"] = {
    "type": "array",
    "items": {
        "type": "object",
        "properties": {"name": {"type": "string"}, "description": {"type": "string"}},
        "required": ["name"],
    },
    "maxItems": 20,
    "uniqueItems": True,
}

# --- Function-calling tool parameter schemas ----------------------------------------------------
S["tool-get-weather"] = {
    "type": "object",
    "properties": {
        "location": {"type": "string", "description": "City and country e.g. Bogota, Colombia"},
        "units": {"type": "string", "enum": ["celsius", "fahrenheit"]},
    },
    "required": ["location", "units"],
    "additionalProperties": False,
}
S["tool-search-flights"] = {
    "type": "object",
    "properties": {
        "origin": {"type": "string", "pattern": "^[A-Z]{3}$", "description": "IATA code"},
        "destination": {"type": "string", "pattern": "^[A-Z]{3}$"},
        "date": {"type": "string", "format": "date"},
        "passengers": {"type": "integer", "minimum": 1, "maximum": 9},
        "cabin": {"type": "string", "enum": ["economy", "premium", "business", "first"]},
        "nonstop": {"type": "boolean"},
    },
    "required": ["origin", "destination", "date", "passengers"],
    "additionalProperties": False,
}
S["tool-create-event"] = {
    "type": "object",
    "properties": {
        "title": {"type": "string", "maxLength": 100},
        "start": {"type": "string", "format": "date-time"},
        "duration_minutes": {"type": "integer", "minimum": 5, "maximum": 1440},
        "attendees": {
            "type": "array",
            "items": {"type": "string", "format": "email"},
            "maxItems": 10,
        },
        "reminder": {"anyOf": [{"type": "integer", "minimum": 0}, {"type": "null"}]},
    },
    "required": ["title", "start"],
    "additionalProperties": False,
}
S["tool-send-email"] = {
    "type": "object",
    "properties": {
        "to": {"type": "string", "format": "email"},
        "subject": {"type": "string", "maxLength": 120},
        "body": {"type": "string"},
        "priority": {"type": "string", "enum": ["low", "normal", "high"], "default": "normal"},
    },
    "required": ["to", "subject", "body"],
    "additionalProperties": False,
}
S["tool-run-sql"] = {
    "type": "object",
    "properties": {
        "query": {"type": "string", "description": "A read-only SELECT statement"},
        "limit": {"type": "integer", "minimum": 1, "maximum": 1000, "default": 100},
        "database": {"type": "string", "enum": ["analytics", "billing"]},
    },
    "required": ["query"],
    "strict": True,
}
S["tool-set-thermostat"] = {
    "type": "object",
    "properties": {
        "room": {"type": "string", "enum": ["living", "bedroom", "office"]},
        "target": {"type": "number", "minimum": 10, "maximum": 30, "description": "degrees C"},
        "mode": {"type": "string", "enum": ["heat", "cool", "auto", "off"]},
    },
    "required": ["room", "target"],
    "additionalProperties": False,
}
S["tool-classify-ticket"] = {
    "type": "object",
    "properties": {
        "category": {"type": "string", "enum": ["billing", "bug", "feature", "account", "other"]},
        "urgency": {"type": "integer", "minimum": 1, "maximum": 5},
        "needs_human": {"type": "boolean"},
        "tags": {"type": "array", "items": {"type": "string", "maxLength": 20}, "maxItems": 3},
    },
    "required": ["category", "urgency", "needs_human"],
    "additionalProperties": False,
}
S["tool-extract-entities"] = {
    "type": "object",
    "properties": {
        "people": {"type": "array", "items": {"type": "string"}},
        "organizations": {"type": "array", "items": {"type": "string"}},
        "amounts": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "value": {"type": "number"},
                    "currency": {"type": "string", "enum": ["USD", "EUR"]},
                },
                "required": ["value", "currency"],
                "additionalProperties": False,
            },
        },
    },
    "required": ["people", "organizations", "amounts"],
    "additionalProperties": False,
}
S["tool-translate"] = {
    "type": "object",
    "properties": {
        "text": {"type": "string"},
        "source_lang": {"type": "string", "pattern": "^[a-z]{2}$"},
        "target_lang": {"type": "string", "pattern": "^[a-z]{2}$"},
        "formality": {"type": ["string", "null"], "enum": ["formal", "informal", None]},
    },
    "required": ["text", "target_lang"],
    "additionalProperties": False,
}
S["tool-shell-command"] = {
    "$schema": D2020,
    "type": "object",
    "properties": {
        "command": {"type": "string", "minLength": 1},
        "timeout_s": {"type": "integer", "exclusiveMinimum": 0, "maximum": 600},
        "env": {"type": "object", "additionalProperties": {"type": "string"}},
    },
    "required": ["command"],
}
S["tool-order-pizza"] = {
    "type": "object",
    "properties": {
        "size": {"type": "string", "enum": ["small", "medium", "large"]},
        "toppings": {
            "type": "array",
            "items": {"type": "string", "enum": ["cheese", "ham", "mushroom", "olive", "pepper"]},
            "uniqueItems": True,
            "maxItems": 4,
        },
        "delivery": {
            "type": "object",
            "properties": {
                "address": {"type": "string"},
                "when": {"type": "string", "format": "time"},
            },
            "required": ["address"],
            "additionalProperties": False,
        },
    },
    "required": ["size", "toppings"],
    "additionalProperties": False,
}

# --- Kubernetes CRD fragments (openAPIV3Schema) -------------------------------------------------
S["k8s-crd-backup-spec"] = {
    "type": "object",
    "description": "BackupSpec defines the desired state of Backup",
    "properties": {
        "schedule": {
            "type": "string",
            "pattern": "^(@(hourly|daily|weekly))|([0-9*/,-]+ ){4}[0-9*/,-]+$",
        },
        "retentionDays": {"type": "integer", "minimum": 1, "maximum": 365, "default": 7},
        "suspend": {"type": "boolean"},
        "storage": {
            "type": "object",
            "properties": {
                "bucket": {"type": "string"},
                "region": {"type": "string"},
                "secretRef": {
                    "type": "object",
                    "properties": {"name": {"type": "string"}},
                    "required": ["name"],
                },
            },
            "required": ["bucket"],
        },
    },
    "required": ["schedule", "storage"],
}
S["k8s-crd-resources"] = {
    "type": "object",
    "properties": {
        "limits": {
            "type": "object",
            "additionalProperties": {
                "anyOf": [{"type": "integer"}, {"type": "string"}],
                "x-kubernetes-int-or-string": True,
                "pattern": "^(\\+|-)?(([0-9]+(\\.[0-9]*)?)|(\\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\\+|-)?(([0-9]+(\\.[0-9]*)?)|(\\.[0-9]+))))?$",
            },
        },
        "requests": {
            "type": "object",
            "additionalProperties": {
                "anyOf": [{"type": "integer"}, {"type": "string"}],
                "x-kubernetes-int-or-string": True,
            },
        },
    },
}
S["k8s-crd-replicas"] = {
    "type": "object",
    "properties": {
        "replicas": {"type": "integer", "format": "int32", "minimum": 0, "maximum": 100},
        "image": {"type": "string"},
        "imagePullPolicy": {"type": "string", "enum": ["Always", "IfNotPresent", "Never"]},
        "paused": {"type": "boolean", "default": False},
    },
    "required": ["image"],
    "x-kubernetes-preserve-unknown-fields": False,
}
S["k8s-crd-status"] = {
    "type": "object",
    "properties": {
        "phase": {"type": "string", "enum": ["Pending", "Running", "Succeeded", "Failed"]},
        "observedGeneration": {"type": "integer", "format": "int64"},
        "conditions": {
            "type": "array",
            "x-kubernetes-list-type": "map",
            "x-kubernetes-list-map-keys": ["type"],
            "items": {
                "type": "object",
                "properties": {
                    "type": {"type": "string", "maxLength": 316},
                    "status": {"type": "string", "enum": ["True", "False", "Unknown"]},
                    "lastTransitionTime": {"type": "string", "format": "date-time"},
                    "reason": {"type": "string", "maxLength": 1024, "minLength": 1},
                    "message": {"type": "string", "maxLength": 32768},
                },
                "required": ["type", "status", "lastTransitionTime"],
            },
        },
    },
}
S["k8s-crd-ports"] = {
    "type": "array",
    "items": {
        "type": "object",
        "properties": {
            "name": {"type": "string", "maxLength": 15},
            "containerPort": {"type": "integer", "format": "int32", "minimum": 1, "maximum": 65535},
            "protocol": {"type": "string", "enum": ["TCP", "UDP", "SCTP"], "default": "TCP"},
        },
        "required": ["containerPort"],
    },
    "x-kubernetes-list-type": "atomic",
}
S["k8s-crd-labels"] = {
    "type": "object",
    "properties": {
        "metadata": {
            "type": "object",
            "properties": {
                "name": {
                    "type": "string",
                    "pattern": "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$",
                    "maxLength": 63,
                },
                "namespace": {"type": "string"},
                "labels": {"type": "object", "additionalProperties": {"type": "string"}},
            },
            "required": ["name"],
        }
    },
    "required": ["metadata"],
}

# --- SchemaStore-style config fragments ---------------------------------------------------------
S["schemastore-package-json-fragment"] = {
    "$schema": D4,
    "id": "https://json.schemastore.org/package.json",
    "title": "JSON schema for NPM package.json files",
    "type": "object",
    "definitions": {
        "person": {
            "description": "A person who has been involved in creating or maintaining this package",
            "type": ["object", "string"],
            "required": ["name"],
            "properties": {
                "name": {"type": "string"},
                "url": {"type": "string", "format": "uri"},
                "email": {"type": "string", "format": "email"},
            },
        }
    },
    "properties": {
        "name": {
            "type": "string",
            "maxLength": 214,
            "minLength": 1,
            "pattern": "^(?:@[a-z0-9-*~][a-z0-9-*._~]*/)?[a-z0-9-~][a-z0-9-._~]*$",
        },
        "version": {"type": "string", "description": "Version must be parseable by node-semver"},
        "private": {"type": "boolean", "default": False},
        "author": {"$ref": "#/definitions/person"},
        "license": {"type": "string"},
    },
    "required": ["name"],
}
S["schemastore-tsconfig-fragment"] = {
    "$schema": D4,
    "id": "https://json.schemastore.org/tsconfig",
    "type": "object",
    "properties": {
        "compilerOptions": {
            "type": "object",
            "properties": {
                "target": {
                    "description": "Set the JavaScript language version for emitted JavaScript",
                    "type": "string",
                    "default": "ES3",
                    "anyOf": [
                        {"enum": ["ES3", "ES5", "ES6", "ES2015", "ES2020", "ESNext"]},
                        {"pattern": "^([Ee][Ss]([356]|(20(1[56789]|2[012]))|[Nn][Ee][Xx][Tt]))$"},
                    ],
                    "markdownDescription": "Set the JavaScript language version.",
                },
                "strict": {"type": "boolean", "default": False},
                "outDir": {"type": "string"},
                "noImplicitAny": {"type": ["boolean", "null"]},
            },
        }
    },
}
S["schemastore-prettierrc-fragment"] = {
    "$schema": D7,
    "$id": "https://json.schemastore.org/prettierrc.json",
    "type": "object",
    "properties": {
        "printWidth": {"type": "integer", "default": 80, "description": "The line length."},
        "tabWidth": {"type": "integer", "default": 2},
        "semi": {"type": "boolean", "default": True},
        "singleQuote": {"type": "boolean", "default": False},
        "trailingComma": {"enum": ["all", "es5", "none"], "default": "all"},
        "endOfLine": {"enum": ["lf", "crlf", "cr", "auto"], "default": "lf"},
    },
    "additionalProperties": False,
}
S["schemastore-github-workflow-fragment"] = {
    "$schema": D7,
    "$comment": "https://help.github.com/en/github/automating-your-workflow-with-github-actions",
    "definitions": {
        "branch": {"type": "array", "items": {"type": "string"}, "minItems": 1},
        "event": {"type": "string", "enum": ["push", "pull_request", "release", "schedule"]},
    },
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "on": {
            "oneOf": [
                {"$ref": "#/definitions/event"},
                {"type": "array", "items": {"$ref": "#/definitions/event"}, "minItems": 1},
            ]
        },
        "env": {
            "type": "object",
            "additionalProperties": {"type": ["string", "number", "boolean"]},
        },
    },
    "required": ["on"],
}
S["schemastore-docker-compose-service"] = {
    "$schema": D7,
    "type": "object",
    "properties": {
        "image": {"type": "string"},
        "restart": {"type": "string", "enum": ["no", "always", "on-failure", "unless-stopped"]},
        "ports": {
            "type": "array",
            "items": {"type": ["string", "number"], "format": "ports"},
            "uniqueItems": True,
        },
        "environment": {
            "type": "object",
            "patternProperties": {".+": {"type": ["string", "number", "null"]}},
        },
        "privileged": {"type": "boolean"},
    },
    "additionalProperties": False,
    "patternProperties": {"^x-": {}},
}
S["schemastore-eslintrc-rule"] = {
    "$schema": D4,
    "definitions": {
        "rule": {
            "oneOf": [
                {"type": "integer", "minimum": 0, "maximum": 2},
                {"type": "string", "enum": ["off", "warn", "error"]},
            ]
        }
    },
    "type": "object",
    "properties": {
        "no-unused-vars": {"$ref": "#/definitions/rule"},
        "eqeqeq": {"$ref": "#/definitions/rule"},
        "semi": {"$ref": "#/definitions/rule"},
    },
    "additionalProperties": False,
}
S["schemastore-renovate-fragment"] = {
    "$schema": D4,
    "type": "object",
    "properties": {
        "enabled": {"type": "boolean", "default": True},
        "schedule": {"type": "array", "items": {"type": "string"}, "default": ["at any time"]},
        "prConcurrentLimit": {"type": "integer", "minimum": 0, "default": 0},
        "automerge": {
            "type": "boolean",
            "default": False,
            "deprecationMessage": "use automergeType",
        },
        "rangeStrategy": {"enum": ["auto", "pin", "bump", "replace", "widen"]},
    },
}
S["schemastore-vscode-extension"] = {
    "$schema": D7,
    "type": "object",
    "properties": {
        "displayName": {"type": "string", "maxLength": 50},
        "categories": {
            "type": "array",
            "items": {"enum": ["Programming Languages", "Snippets", "Linters", "Themes", "Other"]},
            "uniqueItems": True,
        },
        "engines": {
            "type": "object",
            "properties": {
                "vscode": {"type": "string", "pattern": "^\\^?[0-9]+\\.[0-9]+\\.[0-9]+$"}
            },
            "required": ["vscode"],
        },
    },
    "required": ["engines"],
    "defaultSnippets": [{"body": {"displayName": "$1"}}],
}
S["schemastore-babelrc-fragment"] = {
    "$schema": D4,
    "type": "object",
    "properties": {
        "comments": {"type": "boolean", "default": True, "description": "Output comments"},
        "compact": {
            "type": ["boolean", "string"],
            "enum": [True, False, "auto"],
            "default": "auto",
        },
        "sourceMaps": {"type": ["boolean", "string"], "enum": [True, False, "inline", "both"]},
        "minified": {"type": "boolean", "default": False},
    },
}
S["schemastore-lerna"] = {
    "$schema": D7,
    "type": "object",
    "properties": {
        "version": {
            "type": "string",
            "anyOf": [{"pattern": "^[0-9]+\\.[0-9]+\\.[0-9]+$"}, {"enum": ["independent"]}],
        },
        "npmClient": {"enum": ["npm", "yarn", "pnpm"], "default": "npm"},
        "packages": {"type": "array", "items": {"type": "string"}},
        "useWorkspaces": {"type": "boolean"},
    },
    "required": ["version"],
}

# --- Draft-specific idioms ----------------------------------------------------------------------
S["draft04-exclusive-bounds"] = {
    "$schema": D4,
    "id": "http://example.com/measurement.json#",
    "type": "object",
    "properties": {
        "temperature": {
            "type": "number",
            "minimum": -273.15,
            "exclusiveMinimum": True,
            "maximum": 1000,
        },
        "humidity": {"type": "integer", "minimum": 0, "maximum": 100, "exclusiveMaximum": True},
        "unit": {"enum": ["C", "F", "K"]},
    },
    "required": ["temperature", "unit"],
    "additionalProperties": False,
}
S["draft04-tuple"] = {
    "$schema": D4,
    "type": "array",
    "items": [
        {"type": "number", "minimum": -90, "maximum": 90},
        {"type": "number", "minimum": -180, "maximum": 180},
    ],
    "additionalItems": False,
    "minItems": 2,
}
S["draft06-const-contains"] = {
    "$schema": D6,
    "type": "object",
    "properties": {
        "kind": {"const": "point"},
        "coordinates": {"type": "array", "items": {"type": "number"}, "minItems": 2, "maxItems": 3},
        "examples": {"examples": ["ignored"]},
    },
    "required": ["kind", "coordinates"],
    "additionalProperties": False,
}
S["draft07-jsonschema-net-generated"] = {
    "$schema": D7,
    "$id": "http://example.com/example.json",
    "type": "object",
    "title": "The root schema",
    "default": {},
    "required": ["checked", "id", "name"],
    "properties": {
        "checked": {
            "$id": "#/properties/checked",
            "type": "boolean",
            "title": "The checked schema",
            "default": False,
            "examples": [False],
        },
        "id": {
            "$id": "#/properties/id",
            "type": "integer",
            "title": "The id schema",
            "default": 0,
            "examples": [1],
        },
        "name": {
            "$id": "#/properties/name",
            "type": "string",
            "title": "The name schema",
            "default": "",
            "examples": ["A green door"],
        },
    },
    "additionalProperties": True,
}
S["draft07-if-then-else"] = {
    "$schema": D7,
    "type": "object",
    "properties": {
        "country": {"enum": ["US", "CA", "NL"]},
        "postal_code": {"type": "string", "maxLength": 10},
    },
    "required": ["country", "postal_code"],
    "additionalProperties": False,
    "if": {"properties": {"country": {"const": "US"}}},
    "then": {"properties": {"postal_code": {"pattern": "^[0-9]{5}$"}}},
    "else": {"properties": {"postal_code": {"pattern": "^[A-Z0-9 ]{4,7}$"}}},
}
S["draft07-dependencies"] = {
    "$schema": D7,
    "type": "object",
    "properties": {
        "credit_card": {"type": "string", "pattern": "^[0-9]{16}$"},
        "billing_address": {"type": "string", "maxLength": 40},
    },
    "dependencies": {"credit_card": ["billing_address"]},
    "additionalProperties": False,
}
S["draft07-ref-with-siblings"] = {
    "$schema": D7,
    "definitions": {"severity": {"type": "string", "enum": ["low", "medium", "high"]}},
    "type": "object",
    "properties": {
        "severity": {
            "$ref": "#/definitions/severity",
            "description": "ignored sibling",
            "default": "low",
        },
        "score": {"type": "number", "minimum": 0, "maximum": 10},
    },
    "required": ["severity"],
    "additionalProperties": False,
}
S["draft2019-recursive-tree"] = {
    "$schema": D2019,
    "$recursiveAnchor": True,
    "type": "object",
    "properties": {
        "label": {"type": "string", "maxLength": 12},
        "children": {"type": "array", "items": {"$recursiveRef": "#"}, "maxItems": 3},
    },
    "required": ["label"],
    "additionalProperties": False,
}
S["draft2019-defs-dependent"] = {
    "$schema": D2019,
    "$defs": {"currency": {"type": "string", "enum": ["USD", "EUR"]}},
    "type": "object",
    "properties": {
        "amount": {"type": "integer", "minimum": 0, "maximum": 1000000},
        "currency": {"$ref": "#/$defs/currency"},
    },
    "dependentRequired": {"amount": ["currency"]},
    "additionalProperties": False,
}
S["draft2020-prefix-items"] = {
    "$schema": D2020,
    "$comment": "An RGB colour as a tuple",
    "type": "array",
    "prefixItems": [
        {"type": "integer", "minimum": 0, "maximum": 255},
        {"type": "integer", "minimum": 0, "maximum": 255},
        {"type": "integer", "minimum": 0, "maximum": 255},
    ],
    "items": False,
}
S["vendor-annotations"] = {
    "$schema": D7,
    "type": "object",
    "comment": "vendor annotation without $",
    "properties": {
        "id": {"type": "string", "readonly": True, "_format": "objectid"},
        "self": {"type": "string", "self": {"href": "/items/{id}"}},
        "count": {"type": "integer", "minimum": 0, "x-order": 2},
    },
    "required": ["id"],
}
S["deep-nesting"] = {
    "type": "object",
    "properties": {
        "a": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "b": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "properties": {
                                "c": {
                                    "type": "array",
                                    "items": {
                                        "type": "object",
                                        "properties": {"d": {"type": "integer", "maximum": 9}},
                                        "additionalProperties": False,
                                    },
                                }
                            },
                            "additionalProperties": False,
                        },
                    }
                },
                "additionalProperties": False,
            },
        }
    },
    "additionalProperties": False,
}
S["only-undeclared-keys"] = {
    "type": "object",
    "patternProperties": {"^[a-z]+$": {"type": "integer"}},
    "minProperties": 1,
}


# --- pydantic model_json_schema() ---------------------------------------------------------------
class Sentiment(str, enum.Enum):
    positive = "positive"
    negative = "negative"
    neutral = "neutral"


class ReviewAnalysis(BaseModel):
    sentiment: Sentiment
    score: Annotated[float, Field(ge=0, le=1, description="confidence")]
    aspects: list[Literal["price", "quality", "service", "delivery"]] = Field(max_length=4)


class LineItem(BaseModel):
    sku: Annotated[str, Field(pattern=r"^[A-Z0-9]{6}$")]
    quantity: Annotated[int, Field(gt=0, le=100)]
    price: float | None = None


class PurchaseOrder(BaseModel):
    """A purchase order."""

    order_id: uuid.UUID
    placed: dt.date
    items: list[LineItem] = Field(min_length=1, max_length=5)
    notes: str | None = Field(default=None, max_length=200)


class Contact(BaseModel):
    name: Annotated[str, Field(min_length=1, max_length=50, examples=["Ada Lovelace"])]
    phone: Annotated[str | None, Field(pattern=r"^\+?[0-9 ]{7,15}$")] = None
    preferred: Literal["email", "phone", "none"] = "email"


class Address(BaseModel):
    street: str
    city: str
    country: Annotated[str, Field(min_length=2, max_length=2)]


class Customer(BaseModel):
    id: int
    contact: Contact
    shipping: Address
    billing: Address | None = None
    vip: bool = False


class Meeting(BaseModel):
    title: str = Field(max_length=80)
    start: dt.datetime
    minutes: Annotated[int, Field(ge=15, le=480, multiple_of=15)]
    online: bool


class ClaimTriage(BaseModel):
    claim_type: Literal["auto", "home", "health", "travel"]
    amount: Annotated[int, Field(ge=0, le=1_000_000)]
    fraud_suspected: bool
    incident_date: dt.date | None = None


class Node(BaseModel):
    name: str = Field(max_length=10)
    children: list[Node] = Field(default_factory=list, max_length=2)


class Priority(enum.IntEnum):
    low = 1
    medium = 2
    high = 3


class Task(BaseModel):
    title: str
    priority: Priority = Priority.medium
    done: bool = False
    due: dt.date | None = None
    estimate_hours: Annotated[float | None, Field(gt=0, lt=1000)] = None


class Settings(BaseModel, extra="forbid"):
    theme: Literal["light", "dark", "system"] = "system"
    font_size: Annotated[int, Field(ge=8, le=32)] = 14
    language: Annotated[str, Field(pattern=r"^[a-z]{2}(-[A-Z]{2})?$")] = "en"
    beta: bool = False


class Coordinates(BaseModel):
    lat: Annotated[float, Field(ge=-90, le=90)]
    lon: Annotated[float, Field(ge=-180, le=180)]
    label: str | None = None


PYDANTIC = {
    "pydantic-review-analysis": ReviewAnalysis,
    "pydantic-purchase-order": PurchaseOrder,
    "pydantic-customer": Customer,
    "pydantic-meeting": Meeting,
    "pydantic-claim-triage": ClaimTriage,
    "pydantic-tree-node": Node,
    "pydantic-task": Task,
    "pydantic-settings": Settings,
    "pydantic-coordinates": Coordinates,
    "pydantic-contact": Contact,
}


def main() -> None:
    for path in HERE.glob("*.json"):
        path.unlink()
    out = dict(S)
    for name, model in PYDANTIC.items():
        out[name] = model.model_json_schema()
    for name, schema in out.items():
        (HERE / f"{name}.json").write_text(json.dumps(schema, indent=2, ensure_ascii=False) + "\n")
    print(f"{len(out)} schemas")


if __name__ == "__main__":
    main()
