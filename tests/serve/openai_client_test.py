"""`switchyard serve` driven by PyPI's `openai` client, as users' code drives it.

Run by ctest (tests/CMakeLists.txt) with the venv of scripts/setup-test-venv.sh:
    build/test-venv/bin/python tests/serve/openai_client_test.py SWITCHYARD MODEL_CACHE
The references are the CLI's `switchyard run` (a path with no server) and the client's own view
of the reply; the server listens on 127.0.0.1 only.
"""

import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import unittest

import concurrent.futures
import typing

import jsonschema
import openai
import pydantic

SWITCHYARD = sys.argv[1] if len(sys.argv) > 1 else "build/bin/switchyard"
MODEL_CACHE = sys.argv[2] if len(sys.argv) > 2 else "build/model-cache"
SMOLLM2 = os.path.join(MODEL_CACHE, "SmolLM2-135M-Instruct.Q4_1.gguf")


class Server:
    """`switchyard serve MODEL --port 0 ARGS` until stop(); its port from the listening line."""

    def __init__(self, model, *args):
        self.log = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(
            [SWITCHYARD, "serve", model, "--port", "0", *args],
            stdout=subprocess.PIPE, stderr=self.log, text=True)
        deadline = time.monotonic() + 120
        self.port = None
        for line in self.proc.stdout:
            m = re.search(r"listening on http://127\.0\.0\.1:(\d+)", line)
            if m:
                self.port = int(m.group(1))
                break
            if time.monotonic() > deadline:
                break
        if self.port is None:
            self.stop()
            raise RuntimeError("switchyard serve did not start: " + self.stderr())

    def client(self, api_key="none", **kw):
        return openai.OpenAI(base_url=f"http://127.0.0.1:{self.port}/v1", api_key=api_key,
                             max_retries=0, **kw)

    def stderr(self):
        if self.log.closed:
            return self.final_log
        self.log.seek(0)
        return self.log.read().decode(errors="replace")

    def stop(self):
        """SIGTERM: the server drains and exits; its exit code."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        code = self.proc.wait()
        self.final_log = self.stderr()
        self.proc.stdout.close()
        self.log.close()
        return code


def run_ids(model, *args):
    out = subprocess.run([SWITCHYARD, "run", model, *args, "--json"], capture_output=True,
                         check=True).stdout
    return json.loads(out)


def extra(obj, name):
    """A field the server adds (return_token_ids), kept by the client's models as an extra."""
    value = getattr(obj, name, None)
    return value if value is not None else (obj.model_extra or {}).get(name)


GREEDY = {"temperature": 0, "extra_body": {"ignore_eos": True, "return_token_ids": True}}


class TestModel(unittest.TestCase):
    """The seeded test model: its text is noise, its ids are exact."""

    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.TemporaryDirectory()
        cls.model = os.path.join(cls.dir.name, "model")
        subprocess.run([SWITCHYARD, "make-test-model", cls.model, "--seed", "3"], check=True,
                       capture_output=True)
        cls.server = Server(cls.model, "--context", "1024", "--alias", "tiny")
        cls.api = cls.server.client()

    @classmethod
    def tearDownClass(cls):
        assert cls.server.stop() == 0, cls.server.stderr()
        cls.dir.cleanup()

    def test_models(self):
        self.assertEqual([m.id for m in self.api.models.list()], ["tiny"])

    def test_chat_whole_and_streamed_equal_run_chat(self):
        q = "What is the capital of France?"
        want = run_ids(self.model, "--chat", q, "--max-tokens", "10", "--ignore-eos")
        r = self.api.chat.completions.create(
            model="tiny", messages=[{"role": "user", "content": q}], max_tokens=10, **GREEDY)
        self.assertEqual(extra(r.choices[0], "token_ids"), want["generated_ids"])
        self.assertEqual(r.choices[0].finish_reason, "length")
        self.assertEqual(r.usage.completion_tokens, 10)
        self.assertEqual(r.usage.prompt_tokens, want["prompt_tokens"])
        self.assertEqual(r.usage.total_tokens, want["prompt_tokens"] + 10)
        chunks = list(self.api.chat.completions.create(
            model="tiny", messages=[{"role": "user", "content": q}], max_tokens=10, stream=True,
            stream_options={"include_usage": True}, **GREEDY))
        self.assertEqual(chunks[0].choices[0].delta.role, "assistant")
        text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        ids = [i for c in chunks if c.choices for i in (extra(c.choices[0], "token_ids") or [])]
        self.assertEqual(ids, want["generated_ids"])
        self.assertEqual(text, r.choices[0].message.content)
        finishes = [c.choices[0].finish_reason for c in chunks if c.choices]
        self.assertEqual([f for f in finishes if f], ["length"])
        self.assertEqual(chunks[-1].usage.completion_tokens, 10)

    def test_completion_and_stop(self):
        want = run_ids(self.model, "--prompt", "the cat sat", "--max-tokens", "16",
                       "--ignore-eos")
        r = self.api.completions.create(model="tiny", prompt="the cat sat", max_tokens=16,
                                        **GREEDY)
        self.assertEqual(extra(r.choices[0], "token_ids"), want["generated_ids"])
        text = r.choices[0].text
        stop = next((ch for ch in text[len(text) // 3:] if ch.isascii() and ch.isalnum()), None)
        self.assertIsNotNone(stop, text)
        s = self.api.completions.create(model="tiny", prompt="the cat sat", max_tokens=16,
                                        stop=[stop], **GREEDY)
        self.assertEqual(s.choices[0].text, text[:text.index(stop)])
        self.assertEqual(s.choices[0].finish_reason, "stop")

    def test_penalties_and_logit_bias_are_run_s_sampler(self):
        # A bias of 100 on one token makes greedy pick it every step.
        r = self.api.completions.create(model="tiny", prompt="the cat sat", max_tokens=6,
                                        logit_bias={"65": 100}, **GREEDY)
        self.assertEqual(extra(r.choices[0], "token_ids"), [65] * 6)
        # The same penalties as run's flags give run's ids.
        want = run_ids(self.model, "--prompt", "the cat sat", "--max-tokens", "16",
                       "--ignore-eos", "--frequency-penalty", "1.5", "--presence-penalty", "0.5",
                       "--repetition-penalty", "1.3")
        r = self.api.completions.create(model="tiny", prompt="the cat sat", max_tokens=16,
                                        frequency_penalty=1.5, presence_penalty=0.5,
                                        extra_body={"ignore_eos": True, "return_token_ids": True,
                                                    "repetition_penalty": 1.3},
                                        temperature=0)
        self.assertEqual(extra(r.choices[0], "token_ids"), want["generated_ids"])
        plain = run_ids(self.model, "--prompt", "the cat sat", "--max-tokens", "16",
                        "--ignore-eos")
        self.assertNotEqual(plain["generated_ids"], want["generated_ids"])
        with self.assertRaises(openai.BadRequestError) as e:
            self.api.completions.create(model="tiny", prompt="x", max_tokens=2,
                                        logit_bias={"99999999": 1})
        self.assertEqual(e.exception.param, "logit_bias")

    def test_n_choices_through_the_client(self):
        # Greedy: every choice is run's answer; seeded at temperature 1: choice i is n=1 with
        # seed + i (the path with no fork), whole through the client's own types.
        want = run_ids(self.model, "--prompt", "the cat sat", "--max-tokens", "8", "--ignore-eos")
        r = self.api.completions.create(model="tiny", prompt="the cat sat", max_tokens=8, n=3,
                                        **GREEDY)
        self.assertEqual([c.index for c in r.choices], [0, 1, 2])
        for c in r.choices:
            self.assertEqual(extra(c, "token_ids"), want["generated_ids"])
        self.assertEqual(r.usage.completion_tokens, 24)
        seeded = dict(model="tiny", messages=[{"role": "user", "content": "hi"}], max_tokens=8,
                      temperature=1, seed=11,
                      extra_body={"ignore_eos": True, "return_token_ids": True})
        many = self.api.chat.completions.create(n=2, **seeded)
        for i, c in enumerate(many.choices):
            one = self.api.chat.completions.create(**{**seeded, "seed": 11 + i})
            self.assertEqual(c.message.content, one.choices[0].message.content)

    def test_logprobs_read_into_the_clients_own_types(self):
        msgs = [{"role": "user", "content": "Name a colour."}]
        r = self.api.chat.completions.create(model="tiny", messages=msgs, max_tokens=4,
                                             logprobs=True, top_logprobs=2, **GREEDY)
        content = r.choices[0].logprobs.content
        self.assertEqual(len(content), 4)
        self.assertEqual(bytes(b for e in content for b in e.bytes).decode("utf-8", "replace"),
                         r.choices[0].message.content)
        for e in content:
            self.assertEqual(len(e.top_logprobs), 2)
            self.assertEqual(e.token, e.top_logprobs[0].token)  # greedy: the likeliest
            self.assertLessEqual(e.top_logprobs[1].logprob, e.logprob)
        stream = self.api.chat.completions.create(model="tiny", messages=msgs, max_tokens=4,
                                                  logprobs=True, top_logprobs=2, stream=True,
                                                  **GREEDY)
        streamed = [e for c in stream if c.choices and c.choices[0].logprobs
                    for e in c.choices[0].logprobs.content]
        self.assertEqual([e.model_dump() for e in streamed], [e.model_dump() for e in content])
        c = self.api.completions.create(model="tiny", prompt="the cat sat", max_tokens=3,
                                        logprobs=2, **GREEDY)
        self.assertEqual(len(c.choices[0].logprobs.tokens), 3)
        self.assertEqual(len(c.choices[0].logprobs.token_logprobs), 3)
        self.assertEqual(c.choices[0].logprobs.text_offset[0], 0)

    def test_refusals_are_openai_errors_with_sy_codes(self):
        msgs = [{"role": "user", "content": "hi"}]
        with self.assertRaises(openai.BadRequestError) as e:
            self.api.chat.completions.create(model="tiny", messages=msgs, n=17)
        self.assertEqual(e.exception.code, "SY501")
        self.assertEqual(e.exception.param, "n")
        with self.assertRaises(openai.BadRequestError) as e:
            self.api.chat.completions.create(model="tiny", messages=msgs, logprobs=True,
                                             top_logprobs=21)
        self.assertEqual(e.exception.param, "top_logprobs")
        with self.assertRaises(openai.BadRequestError) as e:
            self.api.chat.completions.create(model="tiny", messages=msgs,
                                             tools=[{"type": "function",
                                                     "function": {"name": "f"}}])
        self.assertEqual(e.exception.param, "tools")
        with self.assertRaises(openai.NotFoundError) as e:
            self.api.chat.completions.create(model="gpt-4o", messages=msgs)
        self.assertEqual(e.exception.code, "SY502")
        # Still serving. Greedy with EOS ignored: a sampled answer may end at one token.
        r = self.api.chat.completions.create(model="tiny", messages=msgs, max_tokens=2,
                                             **GREEDY)
        self.assertEqual(r.usage.completion_tokens, 2)


class ApiKey(unittest.TestCase):
    def test_a_wrong_key_is_an_authentication_error(self):
        with tempfile.TemporaryDirectory() as d:
            model = os.path.join(d, "model")
            subprocess.run([SWITCHYARD, "make-test-model", model], check=True,
                           capture_output=True)
            server = Server(model, "--api-key", "s3cret", "--context", "512")
            try:
                with self.assertRaises(openai.AuthenticationError) as e:
                    server.client("wrong").models.list()
                self.assertEqual(e.exception.code, "SY503")
                self.assertEqual(len(server.client("s3cret").models.list().data), 1)
            finally:
                self.assertEqual(server.stop(), 0)


@unittest.skipUnless(os.path.exists(SMOLLM2), SMOLLM2 + " is not there (scripts/fetch-model.sh)")
class SmolLM2(unittest.TestCase):
    def test_the_answer_is_run_chats_and_a_second_turn_reuses_the_cache(self):
        q = "What is the capital of France?"
        want = run_ids(SMOLLM2, "--chat", q, "--max-tokens", "32")
        server = Server(SMOLLM2, "--context", "2048")
        try:
            api = server.client()
            model = api.models.list().data[0].id
            first = api.chat.completions.with_raw_response.create(
                model=model, messages=[{"role": "user", "content": q}], max_tokens=32,
                temperature=0)
            r = first.parse()
            self.assertEqual(r.choices[0].message.content, want["text"])
            self.assertIn("Paris", r.choices[0].message.content)
            self.assertEqual(r.choices[0].finish_reason, "stop")
            turns = [{"role": "user", "content": q},
                     {"role": "assistant", "content": r.choices[0].message.content},
                     {"role": "user", "content": "And of Italy?"}]
            second = api.chat.completions.with_raw_response.create(
                model=model, messages=turns, max_tokens=16, temperature=0)
            cached = int(second.headers["x-switchyard-cached-tokens"])
            self.assertGreaterEqual(cached, r.usage.prompt_tokens // 16 * 16)
            self.assertIn("Rome", second.parse().choices[0].message.content)
            # response_format json_object: Python's json module reads the answer, whole and
            # streamed, and it is the object `run --json-object` writes.
            ask = [{"role": "user", "content":
                    "Describe a cat as a JSON object with the keys name, age and colour."}]
            whole = api.chat.completions.create(model=model, messages=ask, max_tokens=120,
                                                temperature=0,
                                                response_format={"type": "json_object"})
            self.assertEqual(whole.choices[0].finish_reason, "stop")
            cat = json.loads(whole.choices[0].message.content)
            self.assertIsInstance(cat, dict)
            self.assertEqual(set(cat), {"name", "age", "colour"})
            self.assertEqual(whole.choices[0].message.content,
                             run_ids(SMOLLM2, "--chat", ask[0]["content"], "--max-tokens", "120",
                                     "--json-object")["text"])
            stream = api.chat.completions.create(model=model, messages=ask, max_tokens=120,
                                                 temperature=0, stream=True,
                                                 response_format={"type": "json_object"})
            text = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
            self.assertEqual(json.loads(text), cat)
        finally:
            self.assertEqual(server.stop(), 0)

def _obj(props, required=None, **kw):
    return {"type": "object", "properties": props,
            "required": list(props) if required is None else required,
            "additionalProperties": False, **kw}


_NAME = {"type": "string", "minLength": 1, "maxLength": 24}
# What pydantic and zod emit: nested objects, enums, bounded arrays, $ref/$defs, anyOf and
# nullables, const, formats and patterns. Free text and repetition are bounded (maxLength,
# maxItems): at temperature 0 the 135M model would otherwise repeat until max_tokens, as it does
# in a recursive schema (recursion is tested against the grammar in tests/sampling).
SCHEMAS = [
    _obj({"name": _NAME, "age": {"type": "integer"}}),
    _obj({"city": {"enum": ["Paris", "London", "Tokyo"]}, "celsius": {"type": "number"}}),
    _obj({"tags": {"type": "array", "items": _NAME, "minItems": 1, "maxItems": 3}}),
    _obj({"person": _obj({"first": _NAME, "last": _NAME}), "active": {"type": "boolean"}}),
    _obj({"id": {"type": "string", "format": "uuid"}, "ok": {"type": "boolean"}}),
    _obj({"day": {"type": "string", "format": "date"}, "note": _NAME}),
    _obj({"at": {"type": "string", "format": "date-time"}}),
    _obj({"code": {"type": "string", "pattern": "^[A-Z]{3}-[0-9]{2}$"}, "n": {"type": "integer"}}),
    _obj({"value": {"anyOf": [{"type": "integer"}, {"type": "string", "maxLength": 12}]}}),
    _obj({"maybe": {"anyOf": [_NAME, {"type": "null"}]}, "count": {"type": "integer"}}),
    _obj({"kind": {"const": "book"}, "title": _NAME}),
    {"$defs": {"Item": _obj({"sku": _NAME, "qty": {"type": "integer"}})},
     **_obj({"items": {"type": "array", "items": {"$ref": "#/$defs/Item"}, "maxItems": 2}})},
    {"$defs": {"Point": _obj({"x": {"type": "integer"}, "y": {"type": "integer"}})},
     **_obj({"from": {"$ref": "#/$defs/Point"}, "to": {"$ref": "#/$defs/Point"}})},
    _obj({"a": {"type": "string", "maxLength": 16}, "b": {"type": "string", "maxLength": 16}},
         ["a"]),
    _obj({"matrix": {"type": "array", "maxItems": 2,
                     "items": {"type": "array", "items": {"type": "integer"}, "maxItems": 3}}}),
    _obj({"status": {"enum": ["open", "closed", None, 3]}, "priority": {"enum": [1, 2, 3]}}),
    _obj({"scores": {"type": "array", "items": {"type": "number"}, "maxItems": 4}}),
    _obj({"email_like": {"type": "string", "pattern": "^[a-z]{1,12}@[a-z]{1,10}\\.com$"}}),
    _obj({"title": {"type": ["string", "null"], "maxLength": 20}, "year": {"type": "integer"}}),
    _obj({"address": _obj({"street": _NAME, "zip": {"type": "string", "pattern": "^[0-9]{5}$"},
                           "geo": _obj({"lat": {"type": "number"}, "lon": {"type": "number"}})}),
          "verified": {"type": "boolean"}}),
]
PROMPTS = ["Describe a person.", "Give an example record for a shop.",
           "What is the weather like in Paris?"]
CHECKER = jsonschema.Draft202012Validator.FORMAT_CHECKER


class Pet(pydantic.BaseModel):
    name: str
    kind: typing.Literal["cat", "dog"]
    age: int
    toys: list[str] = pydantic.Field(max_length=2)


@unittest.skipUnless(os.path.exists(SMOLLM2), SMOLLM2 + " is not there (scripts/fetch-model.sh)")
class StructuredOutput(unittest.TestCase):
    """response_format json_schema on the real model: every answer validates with jsonschema."""

    @classmethod
    def setUpClass(cls):
        cls.server = Server(SMOLLM2, "--context", "4096", "--parallel", "8")
        cls.api = cls.server.client()
        cls.model = cls.api.models.list().data[0].id

    @classmethod
    def tearDownClass(cls):
        assert cls.server.stop() == 0, cls.server.stderr()

    def ask(self, schema, prompt):
        r = self.api.chat.completions.create(
            model=self.model, max_tokens=300, temperature=0,
            messages=[{"role": "system", "content": "Answer with JSON."},
                      {"role": "user", "content": prompt}],
            response_format={"type": "json_schema",
                             "json_schema": {"name": "answer", "strict": True, "schema": schema}})
        return r.choices[0]

    def test_twenty_schemas_times_three_prompts_all_validate(self):
        # Under the sanitizers (SY_TEST_SCHEMA_PROMPTS=1 in their test preset: 169 s of a
        # 2-core CI otherwise) each schema is asked once, the prompts taken in turn, so every
        # schema and every prompt is still served through the grammar.
        per_schema = int(os.environ.get("SY_TEST_SCHEMA_PROMPTS", len(PROMPTS)))
        self.assertIn(per_schema, range(1, len(PROMPTS) + 1))
        jobs = [(i, schema, PROMPTS[(i + k) % len(PROMPTS)])
                for i, schema in enumerate(SCHEMAS) for k in range(per_schema)]
        self.assertEqual(len(SCHEMAS), 20)
        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            answers = list(pool.map(lambda j: self.ask(j[1], j[2]), jobs))
        for (i, schema, prompt), choice in zip(jobs, answers):
            with self.subTest(schema=i, prompt=prompt):
                self.assertEqual(choice.finish_reason, "stop", choice.message.content)
                jsonschema.validate(json.loads(choice.message.content), schema,
                                    format_checker=CHECKER)

    def test_the_clients_parse_returns_the_pydantic_object(self):
        r = self.api.chat.completions.parse(
            model=self.model, max_tokens=200, temperature=0, response_format=Pet,
            messages=[{"role": "user", "content": "Describe a pet."}])
        pet = r.choices[0].message.parsed
        self.assertIsInstance(pet, Pet)
        self.assertLessEqual(len(pet.toys), 2)

    def test_streamed_is_whole(self):
        schema = SCHEMAS[3]
        whole = self.ask(schema, PROMPTS[0]).message.content
        stream = self.api.chat.completions.create(
            model=self.model, max_tokens=300, temperature=0, stream=True,
            messages=[{"role": "system", "content": "Answer with JSON."},
                      {"role": "user", "content": PROMPTS[0]}],
            response_format={"type": "json_schema",
                             "json_schema": {"name": "answer", "schema": schema}})
        self.assertEqual("".join(c.choices[0].delta.content or "" for c in stream if c.choices),
                         whole)

    def test_a_keyword_not_served_is_a_400_naming_its_place(self):
        with self.assertRaises(openai.BadRequestError) as e:
            self.ask(_obj({"n": {"type": "integer", "minimum": 0}}), PROMPTS[0])
        self.assertEqual(e.exception.param, "response_format.json_schema.schema.properties.n.minimum")
        self.assertEqual(e.exception.code, "SY501")


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1], verbosity=2)
