/* basic.c: the strata C ABI end to end. Usage: basic DIR
 * Exits 0 when every check passes; prints the failing line otherwise. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "strata.h"

static int failures = 0;
#define CHECK(cond)                                                      \
    do {                                                                 \
        if (!(cond)) {                                                   \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__,        \
                    __LINE__, #cond);                                    \
            failures++;                                                  \
        }                                                                \
    } while (0)

/* Expects the call to have set an error; frees it. */
#define EXPECT_ERR(call, code)                                           \
    do {                                                                 \
        char *e_ = NULL;                                                 \
        (void)e_;                                                        \
        int rc_ = (call);                                                \
        CHECK(rc_ == (code));                                            \
        CHECK(err != NULL);                                              \
        strata_free_error(err);                                          \
        err = NULL;                                                      \
    } while (0)

/* A compaction filter: removes values starting with 'x', rewrites those
 * starting with 'y' to "new". */
static int filter_calls_seen = 0;
static int filter_destroyed = 0;

static int drop_x(void *state, const uint8_t *key, size_t keylen, const uint8_t *value,
                  size_t vallen, uint8_t **new_value, size_t *new_len) {
    (void)key;
    (void)keylen;
    __atomic_store_n((int *)state, 1, __ATOMIC_RELAXED);
    if (vallen > 0 && value[0] == 'x') {
        return STRATA_FILTER_REMOVE;
    }
    if (vallen > 0 && value[0] == 'y') {
        uint8_t *v = malloc(3);
        if (v == NULL) {
            return STRATA_FILTER_KEEP;
        }
        memcpy(v, "new", 3);
        *new_value = v;
        *new_len = 3;
        return STRATA_FILTER_CHANGE;
    }
    return STRATA_FILTER_KEEP;
}

static void filter_done(void *state) {
    (void)state;
    filter_destroyed = 1;
}

static int get_eq(strata_t *db, const strata_readoptions_t *ro, const char *k,
                  size_t klen, const char *want, size_t wantlen) {
    char *err = NULL;
    size_t len = 99;
    bool found = false;
    uint8_t *v = strata_get(db, ro, (const uint8_t *)k, klen, &len, &found, &err);
    int ok = err == NULL && found && v != NULL && len == wantlen &&
             memcmp(v, want, wantlen) == 0;
    strata_free(v);
    strata_free_error(err);
    return ok;
}

static int absent(strata_t *db, const strata_readoptions_t *ro, const char *k, size_t klen) {
    char *err = NULL;
    size_t len = 99;
    bool found = true;
    uint8_t *v = strata_get(db, ro, (const uint8_t *)k, klen, &len, &found, &err);
    int ok = err == NULL && !found && v == NULL && len == 0;
    strata_free_error(err);
    return ok;
}

int main(int argc, char **argv) {
    if (argc != 2 && argc != 3) {
        fprintf(stderr, "usage: %s DIR [OPTIONS]  (OPTIONS e.g. engine=kvell)\n", argv[0]);
        return 2;
    }
    char *err = NULL;

    /* Options: a good and a bad setting. */
    strata_options_t *opts = strata_options_create();
    CHECK(strata_options_set(opts, "write_buffer_size", "64K", &err) == STRATA_OK);
    CHECK(err == NULL);
    EXPECT_ERR(strata_options_set(opts, "no_such_option", "1", &err), STRATA_EINVAL);
    EXPECT_ERR(strata_options_set(opts, NULL, "1", &err), STRATA_EINVAL);
    CHECK(strata_options_apply(opts, "bloom_bits_per_key=10,compression=lz4", &err) == STRATA_OK);
    CHECK(strata_options_set(opts, "merge_operator", "append:+", &err) == STRATA_OK);
    const char *engine_opts = argc == 3 ? argv[2] : "";
    CHECK(strata_options_apply(opts, engine_opts, &err) == STRATA_OK);
    /* KVell does not compact: it refuses a filter. */
    const int lsm = strstr(engine_opts, "kvell") == NULL;
    if (lsm) {
        CHECK(strata_options_set_compaction_filter(opts, "drop-x", drop_x, &filter_calls_seen,
                                                   filter_done, &err) == STRATA_OK);
    }

    strata_t *db = strata_open(argv[1], opts, &err);
    strata_options_destroy(opts);
    CHECK(db != NULL && err == NULL);
    if (db == NULL) {
        fprintf(stderr, "open: %s\n", err);
        strata_free_error(err);
        return 1;
    }

    /* Binary-safe keys and values, and the empty key. */
    const char bin_key[] = {'a', 0, 'b'};
    const char bin_val[] = {0, 1, 0, 2};
    CHECK(strata_put(db, NULL, (const uint8_t *)bin_key, 3, (const uint8_t *)bin_val, 4, &err) == STRATA_OK);
    CHECK(get_eq(db, NULL, bin_key, 3, bin_val, 4));
    CHECK(absent(db, NULL, bin_key, 2));
    CHECK(strata_put(db, NULL, NULL, 0, (const uint8_t *)"empty", 5, &err) == STRATA_OK);
    CHECK(get_eq(db, NULL, "", 0, "empty", 5));
    CHECK(strata_put(db, NULL, (const uint8_t *)"novalue", 7, NULL, 0, &err) == STRATA_OK);
    CHECK(get_eq(db, NULL, "novalue", 7, "", 0));

    /* Sync writes and deletes. */
    strata_writeoptions_t *wo = strata_writeoptions_create();
    strata_writeoptions_set_sync(wo, true);
    CHECK(strata_put(db, wo, (const uint8_t *)"k1", 2, (const uint8_t *)"v1", 2, &err) == STRATA_OK);
    CHECK(strata_delete(db, wo, (const uint8_t *)"novalue", 7, &err) == STRATA_OK);
    CHECK(absent(db, NULL, "novalue", 7));

    /* NULL pointer with a length is an error, not a crash. */
    EXPECT_ERR(strata_put(db, NULL, NULL, 3, (const uint8_t *)"v", 1, &err), STRATA_EINVAL);
    EXPECT_ERR(strata_delete(db, NULL, NULL, 1, &err), STRATA_EINVAL);
    {
        bool found = true;
        uint8_t *v = strata_get(db, NULL, NULL, 5, NULL, &found, &err);
        CHECK(v == NULL && !found && err != NULL);
        strata_free_error(err);
        err = NULL;
    }
    EXPECT_ERR(strata_put(NULL, NULL, (const uint8_t *)"k", 1, (const uint8_t *)"v", 1, &err), STRATA_EINVAL);

    /* What the engine guarantees (KVell: no snapshots, no atomic batches). */
    const int snaps = strata_has(db, "snapshots");
    CHECK(snaps == 0 || snaps == 1);
    CHECK(strata_has(db, "atomic_batches") == snaps);
    CHECK(strata_has(db, "no_such_thing") == STRATA_EINVAL);
    CHECK(strata_has(NULL, "snapshots") == STRATA_EINVAL);

    /* Snapshot (where the engine has them), then a batch. */
    strata_snapshot_t *snap = NULL;
    if (snaps) {
        snap = strata_snapshot_create(db, &err);
        CHECK(snap != NULL);
    } else {
        CHECK(strata_snapshot_create(db, &err) == NULL && err != NULL);
        strata_free_error(err);
        err = NULL;
    }
    strata_writebatch_t *b = strata_writebatch_create();
    char key[16], val[16];
    for (int i = 0; i < 100; i++) {
        snprintf(key, sizeof key, "key%03d", i);
        snprintf(val, sizeof val, "val%d", i);
        CHECK(strata_writebatch_put(b, (const uint8_t *)key, strlen(key), (const uint8_t *)val, strlen(val), &err) == STRATA_OK);
    }
    CHECK(strata_writebatch_delete(b, (const uint8_t *)"k1", 2, &err) == STRATA_OK);
    CHECK(strata_writebatch_count(b) == 101);
    CHECK(strata_write(db, wo, b, &err) == STRATA_OK);
    strata_writebatch_clear(b);
    CHECK(strata_writebatch_count(b) == 0);
    strata_writebatch_destroy(b);
    CHECK(absent(db, NULL, "k1", 2));
    CHECK(get_eq(db, NULL, "key042", 6, "val42", 5));

    /* Range deletion where the engine has it: [r1, r3) of r1..r3. */
    const int ranges = strata_has(db, "range_deletes");
    CHECK(ranges == snaps);
    for (int i = 1; i <= 3; i++) {
        snprintf(key, sizeof key, "r%d", i);
        CHECK(strata_put(db, NULL, (const uint8_t *)key, 2, (const uint8_t *)"x", 1, &err) == STRATA_OK);
    }
    if (ranges) {
        CHECK(strata_delete_range(db, NULL, (const uint8_t *)"r1", 2, (const uint8_t *)"r3", 2, &err) == STRATA_OK);
        CHECK(absent(db, NULL, "r2", 2));
        EXPECT_ERR(strata_delete_range(db, NULL, (const uint8_t *)"b", 1, (const uint8_t *)"a", 1, &err), STRATA_EINVAL);
    } else {
        EXPECT_ERR(strata_delete_range(db, NULL, (const uint8_t *)"r1", 2, (const uint8_t *)"r3", 2, &err), STRATA_ENOTSUP);
        CHECK(get_eq(db, NULL, "r2", 2, "x", 1));
    }
    /* Merges where the engine has them: appends joined by '+', also in
     * a batch, in write order. */
    const int merges = strata_has(db, "merges");
    CHECK(merges == snaps);
    if (merges) {
        CHECK(strata_put(db, NULL, (const uint8_t *)"m", 1, (const uint8_t *)"a", 1, &err) == STRATA_OK);
        CHECK(strata_merge(db, wo, (const uint8_t *)"m", 1, (const uint8_t *)"b", 1, &err) == STRATA_OK);
        strata_writebatch_t *mb = strata_writebatch_create();
        CHECK(strata_writebatch_merge(mb, (const uint8_t *)"m", 1, (const uint8_t *)"c", 1, &err) == STRATA_OK);
        CHECK(strata_write(db, NULL, mb, &err) == STRATA_OK);
        strata_writebatch_destroy(mb);
        CHECK(get_eq(db, NULL, "m", 1, "a+b+c", 5));
        CHECK(strata_delete(db, NULL, (const uint8_t *)"m", 1, &err) == STRATA_OK);
    } else {
        EXPECT_ERR(strata_merge(db, NULL, (const uint8_t *)"m", 1, (const uint8_t *)"b", 1, &err), STRATA_ENOTSUP);
        CHECK(absent(db, NULL, "m", 1));
    }

    /* The rest of the example counts keys: the three go. */
    for (int i = 1; i <= 3; i++) {
        snprintf(key, sizeof key, "r%d", i);
        CHECK(strata_delete(db, NULL, (const uint8_t *)key, 2, &err) == STRATA_OK);
    }

    strata_readoptions_t *ro = strata_readoptions_create();
    if (snap) {
        strata_readoptions_set_snapshot(ro, snap);
        CHECK(get_eq(db, ro, "k1", 2, "v1", 2));
        CHECK(absent(db, ro, "key042", 6));
    }

    CHECK(strata_flush(db, &err) == STRATA_OK);

    /* Iterators: forward, backward, seek, and at the snapshot. */
    strata_iterator_t *it = strata_iter_create(db, NULL, &err);
    CHECK(it != NULL);
    int n = 0;
    size_t klen = 0, vlen = 0;
    for (strata_iter_seek_to_first(it); strata_iter_valid(it); strata_iter_next(it)) n++;
    CHECK(n == 102); /* "", "a\0b", key000..key099 */
    strata_iter_seek_to_first(it);
    const uint8_t *kp = strata_iter_key(it, &klen);
    CHECK(kp != NULL && klen == 0); /* the empty key comes first */
    n = 0;
    for (strata_iter_seek_to_last(it); strata_iter_valid(it); strata_iter_prev(it)) n++;
    CHECK(n == 102);
    strata_iter_seek(it, (const uint8_t *)"key05", 5);
    CHECK(strata_iter_valid(it));
    kp = strata_iter_key(it, &klen);
    const uint8_t *vp = strata_iter_value(it, &vlen);
    CHECK(klen == 6 && memcmp(kp, "key050", 6) == 0);
    CHECK(vlen == 5 && memcmp(vp, "val50", 5) == 0);
    strata_iter_prev(it);
    kp = strata_iter_key(it, &klen);
    CHECK(klen == 6 && memcmp(kp, "key049", 6) == 0);
    strata_iter_seek_for_prev(it, (const uint8_t *)"key05", 5);
    kp = strata_iter_key(it, &klen);
    CHECK(klen == 6 && memcmp(kp, "key049", 6) == 0);
    strata_iter_seek(it, (const uint8_t *)"zzz", 3);
    CHECK(!strata_iter_valid(it));
    CHECK(strata_iter_key(it, &klen) == NULL && klen == 0);
    CHECK(strata_iter_get_error(it, &err) == STRATA_OK && err == NULL);
    strata_iter_destroy(it);

    if (snap) {
        it = strata_iter_create(db, ro, &err);
        n = 0;
        for (strata_iter_seek_to_first(it); strata_iter_valid(it); strata_iter_next(it)) n++;
        CHECK(n == 3); /* "", "a\0b", "k1" ("novalue" was deleted before it) */
        strata_iter_destroy(it);
    }
    strata_readoptions_destroy(ro);
    strata_snapshot_release(snap);

    /* NULL iterator calls are no-ops. */
    strata_iter_seek_to_first(NULL);
    strata_iter_next(NULL);
    CHECK(!strata_iter_valid(NULL));
    CHECK(strata_iter_key(NULL, &klen) == NULL);

    /* A checkpoint beside the database: a copy that opens on its own (the LSM;
       KVell has none). */
    {
        char ck[4096];
        snprintf(ck, sizeof ck, "%s-checkpoint", argv[1]);
        if (snaps) {
            CHECK(strata_checkpoint(db, ck, &err) == STRATA_OK && err == NULL);
            EXPECT_ERR(strata_checkpoint(db, ck, &err), STRATA_EINVAL); /* it exists now */
            strata_options_t *co = strata_options_create();
            strata_t *copy = strata_open(ck, co, &err);
            strata_options_destroy(co);
            CHECK(copy != NULL);
            if (copy) {
                CHECK(get_eq(copy, NULL, "key099", 6, "val99", 5));
                CHECK(absent(copy, NULL, "k1", 2));
                strata_destroy(copy);
            }
        } else {
            EXPECT_ERR(strata_checkpoint(db, ck, &err), STRATA_ENOTSUP);
        }
        EXPECT_ERR(strata_checkpoint(db, NULL, &err), STRATA_EINVAL);

        /* A backup, then a restore of it into a new directory (LSM). */
        char store[4096], restored[4096];
        snprintf(store, sizeof store, "%s-backups", argv[1]);
        snprintf(restored, sizeof restored, "%s-restored", argv[1]);
        uint64_t id = 0;
        if (snaps) {
            CHECK(strata_backup(db, store, &id, &err) == STRATA_OK && err == NULL && id == 1);
            CHECK(strata_backup(db, store, NULL, &err) == STRATA_OK && err == NULL);
            CHECK(strata_restore(store, 1, restored, &err) == STRATA_OK && err == NULL);
            EXPECT_ERR(strata_restore(store, 1, restored, &err), STRATA_EINVAL); /* it exists now */
            EXPECT_ERR(strata_restore(store, 99, ck, &err), STRATA_ENOTFOUND);
            strata_options_t *ro = strata_options_create();
            strata_t *back = strata_open(restored, ro, &err);
            strata_options_destroy(ro);
            CHECK(back != NULL);
            if (back) {
                CHECK(get_eq(back, NULL, "key099", 6, "val99", 5));
                strata_destroy(back);
            }
        } else {
            EXPECT_ERR(strata_backup(db, store, &id, &err), STRATA_ENOTSUP);
        }
        EXPECT_ERR(strata_backup(db, NULL, &id, &err), STRATA_EINVAL);
        EXPECT_ERR(strata_restore(NULL, 0, restored, &err), STRATA_EINVAL);
    }

    /* Keyspaces (LSM): a handle per keyspace, its own data, and one batch
     * across keyspaces; KVell has none. */
    if (snaps) {
        strata_t *users = strata_keyspace_open(db, "users", "compression=zstd", &err);
        CHECK(users != NULL && err == NULL);
        if (users) {
            CHECK(strata_put(users, NULL, (const uint8_t *)"key099", 6, (const uint8_t *)"u", 1, &err) == STRATA_OK);
            CHECK(get_eq(users, NULL, "key099", 6, "u", 1));
            CHECK(get_eq(db, NULL, "key099", 6, "val99", 5));
            strata_writebatch_t *kb = strata_writebatch_create();
            CHECK(strata_writebatch_put_in(kb, users, (const uint8_t *)"ka", 2, (const uint8_t *)"1", 1, &err) == STRATA_OK);
            CHECK(strata_writebatch_put_in(kb, db, (const uint8_t *)"ka", 2, (const uint8_t *)"0", 1, &err) == STRATA_OK);
            CHECK(strata_writebatch_delete_in(kb, users, (const uint8_t *)"key099", 6, &err) == STRATA_OK);
            CHECK(strata_write(db, NULL, kb, &err) == STRATA_OK && err == NULL);
            strata_writebatch_destroy(kb);
            CHECK(get_eq(users, NULL, "ka", 2, "1", 1));
            CHECK(get_eq(db, NULL, "ka", 2, "0", 1));
            CHECK(absent(users, NULL, "key099", 6));
            size_t nlen = 0;
            char *names = strata_keyspace_names(db, &nlen, &err);
            CHECK(names != NULL && nlen == sizeof "default" + sizeof "users" &&
                  strcmp(names, "default") == 0 && strcmp(names + 8, "users") == 0);
            strata_free(names);
            EXPECT_ERR(strata_checkpoint(users, argv[1], &err), STRATA_ENOTSUP);
            CHECK(strata_keyspace_drop(db, "users", &err) == STRATA_OK && err == NULL);
            EXPECT_ERR(strata_put(users, NULL, (const uint8_t *)"k", 1, (const uint8_t *)"v", 1, &err), STRATA_EINVAL);
            strata_destroy(users);
        }
        EXPECT_ERR(strata_keyspace_drop(db, "default", &err), STRATA_EINVAL);
        CHECK(strata_keyspace_open(db, "", NULL, &err) == NULL && err != NULL);
        strata_free_error(err);
        err = NULL;
    } else {
        CHECK(strata_keyspace_open(db, "users", NULL, &err) == NULL && err != NULL);
        strata_free_error(err);
        err = NULL;
    }

    /* The compaction filter (LSM): a compaction removes the 'x' value and
     * rewrites the 'y' one; KVell keeps both. */
    CHECK(strata_put(db, NULL, (const uint8_t *)"fx", 2, (const uint8_t *)"xgone", 5, &err) == STRATA_OK);
    CHECK(strata_put(db, NULL, (const uint8_t *)"fy", 2, (const uint8_t *)"yold", 4, &err) == STRATA_OK);
    CHECK(strata_compact(db, &err) == STRATA_OK && err == NULL);
    if (lsm) {
        CHECK(absent(db, NULL, "fx", 2));
        CHECK(get_eq(db, NULL, "fy", 2, "new", 3));
        CHECK(__atomic_load_n(&filter_calls_seen, __ATOMIC_RELAXED) == 1);
    } else {
        CHECK(get_eq(db, NULL, "fx", 2, "xgone", 5));
    }
    EXPECT_ERR(strata_compact(NULL, &err), STRATA_EINVAL);

    char *json = strata_stats_json(db);
    CHECK(json != NULL && json[0] == '{' && strstr(json, "user_writes") != NULL);
    strata_free(json);
    CHECK(strata_stats_json(NULL) == NULL);

    /* Close, then every call on the handle fails with STRATA_ECLOSED. */
    CHECK(strata_close(db, &err) == STRATA_OK);
    CHECK(strata_close(db, &err) == STRATA_OK);
    EXPECT_ERR(strata_put(db, NULL, (const uint8_t *)"k", 1, (const uint8_t *)"v", 1, &err), STRATA_ECLOSED);
    EXPECT_ERR(strata_delete(db, NULL, (const uint8_t *)"k", 1, &err), STRATA_ECLOSED);
    {
        bool found = true;
        uint8_t *v = strata_get(db, NULL, (const uint8_t *)"k", 1, NULL, &found, &err);
        CHECK(v == NULL && !found && err != NULL);
        strata_free_error(err);
        err = NULL;
    }
    CHECK(strata_iter_create(db, NULL, &err) == NULL && err != NULL);
    strata_free_error(err);
    err = NULL;
    CHECK(strata_snapshot_create(db, &err) == NULL && err != NULL);
    /* An error left in *errptr is freed by the next call. */
    CHECK(strata_flush(db, &err) == STRATA_ECLOSED && err != NULL);
    strata_free_error(err);
    err = NULL;
    strata_destroy(db);
    strata_writeoptions_destroy(wo);
    /* The options and the database are gone: so is the filter. */
    CHECK(filter_destroyed == lsm);

    /* Reopen (with the same engine): everything acknowledged is there. */
    opts = strata_options_create();
    CHECK(strata_options_apply(opts, engine_opts, &err) == STRATA_OK);
    db = strata_open(argv[1], opts, &err);
    strata_options_destroy(opts);
    CHECK(db != NULL);
    CHECK(get_eq(db, NULL, bin_key, 3, bin_val, 4));
    CHECK(get_eq(db, NULL, "key099", 6, "val99", 5));
    strata_destroy(db);

    /* Opening a path that is a file fails cleanly. */
    CHECK(strata_open(NULL, NULL, &err) == NULL && err != NULL);
    strata_free_error(err);
    err = NULL;

    if (failures == 0) printf("basic.c: all checks passed (strata %s)\n", strata_version());
    return failures == 0 ? 0 : 1;
}
