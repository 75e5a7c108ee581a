"""Schemathesis hooks of the API contract lab (70-api-contract.sh): the client behaviour the
document asks for in words, which JSON Schema cannot say.

- Every write carries a key of its own: the document says an Idempotency-Key is unique per write,
  and a key reused for another request is refused with 422, as it must be. Generated keys are few
  and repeat, so a key that is valid is replaced by a fresh one; an invalid one is left as it is,
  for the server to refuse.
- No string of a body holds a control character but tab, line feed and carriage return: the
  server refuses such a body with 400 wherever the string is (the document's description). The
  named fields say so with a pattern; members a schema leaves free (`additionalProperties`) cannot,
  so in a case meant to be valid their control characters become `?`.
- An invitation is for someone not yet a member: the data a run draws repeats (`0@0.0` again and
  again) or comes from answers (`ana@example.com`), and the server refuses to invite a member with
  422, as it must; so in a case meant to be valid the address is made one no member has.
- A record of the collections `messages` and `pins` is held to their own rules (the collection's
  description): a case meant to be valid writes its free-form body to `notes` instead.
- A sync cursor is valid only as the server gave it out: a case meant to be valid is sent without
  one (a first sync) instead of with one made up.
"""

import itertools
import re
import uuid

import schemathesis
from schemathesis.generation import GenerationMode

KEY = re.compile(r'^("[!#-\[\]-~]{1,255}"|[A-Za-z*][!#$%&\'*+\-.^_`|~0-9A-Za-z:/]{0,254})$')
CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f]")
run = uuid.uuid4().hex[:12]
keys = itertools.count(1)


def without_control_characters(value):
    if isinstance(value, str):
        return CONTROL.sub("?", value)
    if isinstance(value, list):
        return [without_control_characters(item) for item in value]
    if isinstance(value, dict):
        return {without_control_characters(name): without_control_characters(item) for name, item in value.items()}
    return value


def not_yet_a_member(email):
    """`email` made an address no member has: a prefix of its own where one fits in the 254
    characters an address may have, else the same length with the local part's start replaced,
    else a short address."""
    unique = f"lab{run}{next(keys)}"
    local, domain = email.split("@", 1)
    if len(email) + len(unique) + 1 <= 254:
        return f"{unique}.{email}"
    if len(local) >= len(unique):
        return unique + local[len(unique):] + "@" + domain
    return f"{unique}@example.org"


@schemathesis.hook
def before_call(ctx, case, **kwargs):
    headers = case.headers or {}
    for name, value in list(headers.items()):
        if name.lower() == "idempotency-key" and isinstance(value, str) and KEY.match(value):
            headers[name] = f'"contract-lab-{run}-{next(keys)}"'
    positive = case.meta is not None and case.meta.generation.mode == GenerationMode.POSITIVE
    if positive and isinstance(case.body, (dict, list, str)):
        case.body = without_control_characters(case.body)
    if positive and case.operation.path == "/api/workspace/invitations" and isinstance(case.body, dict):
        email = case.body.get("email")
        if isinstance(email, str) and "@" in email:
            case.body["email"] = not_yet_a_member(email)
    if positive and case.operation.path == "/api/records/{collection}/{id}" and case.method.upper() in ("PUT", "PATCH") \
            and case.path_parameters and case.path_parameters.get("collection") in ("messages", "pins"):
        case.path_parameters["collection"] = "notes"
    if positive and case.operation.path == "/api/sync" and case.query and "cursor" in case.query:
        del case.query["cursor"]
