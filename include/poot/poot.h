/* poot's C API: the stable interface of the installed runtime library
 * (libpoot, `find_package(poot CONFIG)`, target poot::runtime). It loads a
 * plan file, opens a session on a backend and device, binds weights (from a
 * checkpoint path or host memory), runs steps with inputs and slots from host
 * memory, and reads outputs and states. Every check is the runtime's own, as
 * `poot run` makes it: readPlanFile's verification, the Session's device
 * check, and each step's bind checks (dtype, shape, slot ranges, token ranges).
 * The engine (poot_engine_*) serves a model's paged prefill and decode plans
 * as `poot generate` does: requests in, tokens out as they come.
 *
 * Every function that can fail returns a poot_status; on anything but
 * POOT_OK, poot_last_error() holds the message of that failure (for this
 * thread, until its next failing call). No function throws or aborts on bad
 * input: a null pointer, an unknown name or a mistyped tensor is an error
 * code and a message naming it, and changes nothing. Objects are not shared
 * between threads without the caller's own locking. */
#ifndef POOT_POOT_H
#define POOT_POOT_H

#include <stddef.h>
#include <stdint.h>

#if defined(__GNUC__)
#define POOT_API __attribute__((visibility("default")))
#else
#define POOT_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* Bumped when a declaration here changes incompatibly. */
#define POOT_API_VERSION 3

/* The kinds of error, one for each of the runtime's (lib/ir/diag.h). */
typedef enum poot_status {
  POOT_OK = 0,
  POOT_ERROR_IO = 1,         /* a file could not be read */
  POOT_ERROR_SYNTAX = 2,
  POOT_ERROR_VERIFY = 3,
  POOT_ERROR_PROFILE = 4,
  POOT_ERROR_FORMAT = 5,     /* a plan or checkpoint that is not what it claims */
  POOT_ERROR_USAGE = 6,      /* a null pointer, an unknown backend, a bad argument */
  POOT_ERROR_BIND = 7,       /* a tensor that does not fit the plan, an unknown name */
  POOT_ERROR_RANGE = 8,      /* a slot or token word out of range; a failed validation */
  POOT_ERROR_CAPABILITY = 9, /* the device (or its driver) cannot run the plan */
  POOT_ERROR_MEMORY = 10,    /* host memory ran out */
  POOT_ERROR_TRUST = 11,     /* a plan not signed by a trusted key */
} poot_status;

typedef enum poot_dtype {
  POOT_F32 = 0,
  POOT_F16 = 1,
  POOT_BF16 = 2,
  POOT_I32 = 3,
  POOT_I64 = 4,
  POOT_BOOL = 5, /* one byte an element */
} poot_dtype;

/* What a plan's parameter or result is. */
typedef enum poot_kind {
  POOT_INPUT = 0,  /* bound at every step */
  POOT_WEIGHT = 1, /* bound once, before the first step */
  POOT_STATE = 2,  /* persists across steps (a KV cache); starts as zeros */
  POOT_SLOT = 3,   /* per-step integers with a declared range (pos, len) */
  POOT_OUTPUT = 4, /* written by every step */
} poot_kind;

/* A dense row-major tensor in host memory. As an argument, `bytes` must be
 * exactly the elements times the dtype's size, and `shape` (rank entries)
 * and `data` may be null only where there is nothing to point at. As a
 * result, the pointers stay valid as the function returning them says. */
typedef struct poot_tensor {
  const char* name;
  poot_dtype dtype;
  int32_t rank;
  const int64_t* shape;
  const void* data;
  size_t bytes;
} poot_tensor;

typedef struct poot_plan poot_plan;
typedef struct poot_session poot_session;

/* The message of this thread's last failed call ("" before any). */
POOT_API const char* poot_last_error(void);
/* POOT_API_VERSION of the library, to compare with the header's. */
POOT_API int poot_api_version(void);

/* Reads and verifies a plan file (readPlanFile: identifier, version,
 * checksum, every record). */
POOT_API poot_status poot_plan_load(const char* path, poot_plan** plan);
/* poot_plan_load for a signed plan: `path`.sig must be a signature of the
 * plan file's bytes by one of the `count` (at least 1) public key files
 * (pootc keygen), checked before anything in the plan is read;
 * POOT_ERROR_TRUST when it is missing, by another key, or does not match. */
POOT_API poot_status poot_plan_load_trusted(const char* path, const char* const* public_keys, size_t count,
                                            poot_plan** plan);
POOT_API void poot_plan_free(poot_plan* plan);
/* The plan's target ("spirv", "ptx", "hsaco") and device name; valid while the plan lives. */
POOT_API const char* poot_plan_target(const poot_plan* plan);
POOT_API const char* poot_plan_device(const poot_plan* plan);
/* How many parameters (or outputs) of a kind the plan has, and the i-th of
 * them, in the graph's order: name, dtype and shape, data null; valid while
 * the plan lives. */
POOT_API poot_status poot_plan_count(const poot_plan* plan, poot_kind kind, size_t* count);
POOT_API poot_status poot_plan_param(const poot_plan* plan, poot_kind kind, size_t index, poot_tensor* param);

/* Opens `backend` ("vulkan", "cuda" or "hip") on `device` (an index or a piece of
 * its name; null or "" for the backend's choice) and starts a session of the
 * plan on it (the plan's target, arch, device name and limits checked
 * against the live device; allow_other_device nonzero runs a plan built for
 * another device). The session keeps its own copy of the plan. */
POOT_API poot_status poot_session_create(const poot_plan* plan, const char* backend, const char* device,
                                         int allow_other_device, poot_session** session);
POOT_API void poot_session_free(poot_session* session);
/* The session's plan, valid while the session lives. */
POOT_API const poot_plan* poot_session_plan(const poot_session* session);

/* Binds weights from a checkpoint as `poot run --weights` does: a
 * .safetensors file, a shard index or a model directory; every weight of the
 * plan must be there with its exact type; each is uploaded straight from the
 * mapped file. */
POOT_API poot_status poot_session_bind_weights_file(poot_session* session, const char* path);
/* Binds `count` weights from host memory, all checked before any is uploaded. */
POOT_API poot_status poot_session_bind_weights(poot_session* session, const poot_tensor* weights, size_t count);
/* Sets a state's value (it otherwise keeps what the last step wrote). */
POOT_API poot_status poot_session_set_state(poot_session* session, const poot_tensor* state);

/* One step: `inputs` holds every input and slot of the plan, by name; all
 * are checked before anything is uploaded, and a refused step changes
 * nothing. A failed validation witness is POOT_ERROR_RANGE and publishes
 * nothing. */
POOT_API poot_status poot_session_step(poot_session* session, const poot_tensor* inputs, size_t count);
/* An output of the last step, which must have succeeded; its pointers are
 * valid until the next step or the session's end. */
POOT_API poot_status poot_session_output(poot_session* session, const char* name, poot_tensor* output);
/* A state's current value, read back from the device; its pointers are
 * valid until the next read of the same state, the next step or the
 * session's end. */
POOT_API poot_status poot_session_read_state(poot_session* session, const char* name, poot_tensor* state);

/* The serving engine: one model's paged prefill and decode plans (pootc
 * trace --kv paged) on one device, with one copy of the weights and of the
 * KV pools shared by both, a paged KV cache with prefix caching and
 * continuous batching, as `poot generate` runs them (docs/runtime.md). */
typedef struct poot_engine poot_engine;

/* How a request ended. */
typedef enum poot_finish {
  POOT_FINISH_NONE = 0,      /* it goes on */
  POOT_FINISH_LENGTH = 1,    /* it generated max_new tokens */
  POOT_FINISH_STOP = 2,      /* it generated one of its stop ids (the last token) */
  POOT_FINISH_CANCELLED = 3, /* poot_engine_cancel ended it (token -1) */
} poot_finish;

/* What a request asks for. */
typedef struct poot_request {
  const int32_t* prompt; /* token ids, each in [0, vocabulary) */
  size_t length;         /* at least 1 */
  int32_t max_new;       /* tokens to generate, at least 1 */
  const int32_t* stop;   /* end-of-sequence ids (kept in the output); null when stop_count is 0 */
  size_t stop_count;
  double temperature;    /* 0: greedy (the first largest logit); above 0: seeded sampling */
  double top_p;          /* in (0, 1]: the nucleus */
  int32_t top_k;         /* at least 0: the k likeliest tokens; 0: every token */
  double min_p;          /* in [0, 1]: the tokens at least this fraction as likely as the likeliest; 0: every token */
  double repetition_penalty; /* above 0: a seen token's positive logit divided by it, a negative one multiplied; 1: off */
  double frequency_penalty;  /* in [-2, 2]: taken from a token's logit times its count in the output; 0: off */
  double presence_penalty;   /* in [-2, 2]: taken from the logit of a token the output holds; 0: off */
  uint64_t seed;         /* the request draws from its own generator, seeded from this and its index */
  const char* adapter;   /* an adapter poot_engine_load_adapter loaded; null: the base model */
} poot_request;

/* A token for a request, in the order the engine generated them. */
typedef struct poot_event {
  int64_t request;    /* as poot_engine_submit numbered it */
  int32_t token;      /* -1 when the request was cancelled */
  poot_finish finish; /* how the request ended with this token */
} poot_event;

/* Starts an engine over the plans of one model: `prefill` a paged prefill
 * plan, `decode` a paged decode plan of one token a row, and `mixed` a
 * mixed plan (pootc trace --phase mixed: generated tokens beside prompt
 * chunks in one step) or null for none, all of the same capacity,
 * vocabulary, pool, states and weights (else POOT_ERROR_BIND naming the
 * plan). It opens `backend` on `device` as poot_session_create does,
 * binds the weights once from the checkpoint at `weights` (a .safetensors
 * file, a shard index or a model directory; null: every weight from the
 * generator with seed 0, as `poot run` draws them), and zeroes the pools.
 * prefix_cache 0 computes every prompt and caches nothing. The engine keeps
 * its own copies of the plans. */
POOT_API poot_status poot_engine_create(const poot_plan* prefill, const poot_plan* decode, const poot_plan* mixed,
                                        const char* backend,
                                        const char* device, int allow_other_device, const char* weights,
                                        int prefix_cache, poot_engine** engine);
POOT_API void poot_engine_free(poot_engine* engine);
/* Loads a LoRA adapter as PEFT saves it (adapter_config.json,
 * adapter_model.safetensors) under `name`, merged into the weights it
 * targets; requests naming it run on it. Loading a name again gives the
 * requests submitted from then on the new weights; those submitted before
 * finish on the old. */
POOT_API poot_status poot_engine_load_adapter(poot_engine* engine, const char* name, const char* dir);
/* Queues a request, numbered from 0 in submission order. A request the
 * plans cannot serve (a token id outside the vocabulary, more tokens than
 * the capacity or the pool holds: POOT_ERROR_RANGE), bad sampling options,
 * max_new below 1 or an unknown adapter (POOT_ERROR_USAGE) is refused and
 * nothing is queued. */
POOT_API poot_status poot_engine_submit(poot_engine* engine, const poot_request* request, int64_t* id);
/* Runs one step (a prefill or a decode of the requests its batcher picks);
 * *ran is 0 when no request was queued or running, else 1. The step's
 * tokens are then ready for poot_engine_poll. A failed step changes nothing:
 * stepping again runs it again. */
POOT_API poot_status poot_engine_step(poot_engine* engine, int* ran);
/* Ends a request, queued or running; its event (token -1,
 * POOT_FINISH_CANCELLED) is queued. *cancelled is 0 when it had already
 * ended. An id never given is POOT_ERROR_USAGE. */
POOT_API poot_status poot_engine_cancel(poot_engine* engine, int64_t id, int* cancelled);
/* Moves up to `capacity` of the queued events, oldest first, into
 * `events`; *count says how many. */
POOT_API poot_status poot_engine_poll(poot_engine* engine, poot_event* events, size_t capacity, size_t* count);

#ifdef __cplusplus
}
#endif

#endif /* POOT_POOT_H */
