// raii.cpp: a small C++17 RAII wrapper over the strata C ABI, and its use.
// Usage: raii DIR. Exits 0 when every check passes.
#include <cstdio>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "strata.h"

namespace strata {

class Error : public std::runtime_error {
  public:
    Error(int code, const std::string &msg) : std::runtime_error(msg), code_(code) {}
    int code() const { return code_; }

  private:
    int code_;
};

// Throws when a C call reported an error; frees the message. `err` is taken
// by reference: it is read after the call that is the other argument.
inline void check(int rc, char *&err) {
    if (err != nullptr) {
        std::string msg(err);
        strata_free_error(err);
        err = nullptr;
        throw Error(rc, msg);
    }
}

template <typename T, void (*Free)(T *)> struct Deleter {
    void operator()(T *p) const { Free(p); }
};
template <typename T, void (*Free)(T *)> using Handle = std::unique_ptr<T, Deleter<T, Free>>;

inline const uint8_t *bytes(std::string_view s) { return reinterpret_cast<const uint8_t *>(s.data()); }

class Snapshot {
  public:
    explicit Snapshot(strata_snapshot_t *s) : s_(s) {}
    const strata_snapshot_t *get() const { return s_.get(); }

  private:
    Handle<strata_snapshot_t, strata_snapshot_release> s_;
};

class Batch {
  public:
    Batch() : b_(strata_writebatch_create()) {}
    Batch &put(std::string_view k, std::string_view v) {
        char *err = nullptr;
        check(strata_writebatch_put(b_.get(), bytes(k), k.size(), bytes(v), v.size(), &err), err);
        return *this;
    }
    Batch &del(std::string_view k) {
        char *err = nullptr;
        check(strata_writebatch_delete(b_.get(), bytes(k), k.size(), &err), err);
        return *this;
    }
    size_t size() const { return strata_writebatch_count(b_.get()); }
    const strata_writebatch_t *get() const { return b_.get(); }

  private:
    Handle<strata_writebatch_t, strata_writebatch_destroy> b_;
};

class Iterator {
  public:
    explicit Iterator(strata_iterator_t *it) : it_(it) {}
    void seek_to_first() { strata_iter_seek_to_first(it_.get()); }
    void seek_to_last() { strata_iter_seek_to_last(it_.get()); }
    void seek(std::string_view k) { strata_iter_seek(it_.get(), bytes(k), k.size()); }
    bool valid() const { return strata_iter_valid(it_.get()); }
    void next() { strata_iter_next(it_.get()); }
    void prev() { strata_iter_prev(it_.get()); }
    std::string_view key() const {
        size_t n = 0;
        auto p = strata_iter_key(it_.get(), &n);
        return {reinterpret_cast<const char *>(p), n};
    }
    std::string_view value() const {
        size_t n = 0;
        auto p = strata_iter_value(it_.get(), &n);
        return {reinterpret_cast<const char *>(p), n};
    }
    void status() const {
        char *err = nullptr;
        check(strata_iter_get_error(it_.get(), &err), err);
    }

  private:
    Handle<strata_iterator_t, strata_iter_destroy> it_;
};

class Db {
  public:
    explicit Db(const std::string &path, const std::string &opts = "") {
        Handle<strata_options_t, strata_options_destroy> o(strata_options_create());
        char *err = nullptr;
        if (!opts.empty()) check(strata_options_apply(o.get(), opts.c_str(), &err), err);
        db_.reset(strata_open(path.c_str(), o.get(), &err));
        check(STRATA_EINVAL, err);
    }
    void put(std::string_view k, std::string_view v, bool sync = false) {
        Handle<strata_writeoptions_t, strata_writeoptions_destroy> wo(strata_writeoptions_create());
        strata_writeoptions_set_sync(wo.get(), sync);
        char *err = nullptr;
        check(strata_put(db_.get(), wo.get(), bytes(k), k.size(), bytes(v), v.size(), &err), err);
    }
    void del(std::string_view k) {
        char *err = nullptr;
        check(strata_delete(db_.get(), nullptr, bytes(k), k.size(), &err), err);
    }
    std::optional<std::string> get(std::string_view k, const Snapshot *snap = nullptr) const {
        Handle<strata_readoptions_t, strata_readoptions_destroy> ro(strata_readoptions_create());
        if (snap) strata_readoptions_set_snapshot(ro.get(), snap->get());
        char *err = nullptr;
        size_t n = 0;
        bool found = false;
        uint8_t *v = strata_get(db_.get(), ro.get(), bytes(k), k.size(), &n, &found, &err);
        check(STRATA_EIO, err);
        if (!found) return std::nullopt;
        std::string out(reinterpret_cast<char *>(v), n);
        strata_free(v);
        return out;
    }
    void write(const Batch &b, bool sync = false) {
        Handle<strata_writeoptions_t, strata_writeoptions_destroy> wo(strata_writeoptions_create());
        strata_writeoptions_set_sync(wo.get(), sync);
        char *err = nullptr;
        check(strata_write(db_.get(), wo.get(), b.get(), &err), err);
    }
    Snapshot snapshot() const {
        char *err = nullptr;
        auto s = strata_snapshot_create(db_.get(), &err);
        check(STRATA_EINVAL, err);
        return Snapshot(s);
    }
    Iterator iter(const Snapshot *snap = nullptr) const {
        Handle<strata_readoptions_t, strata_readoptions_destroy> ro(strata_readoptions_create());
        if (snap) strata_readoptions_set_snapshot(ro.get(), snap->get());
        char *err = nullptr;
        auto it = strata_iter_create(db_.get(), ro.get(), &err);
        check(STRATA_EINVAL, err);
        return Iterator(it);
    }
    std::string stats_json() const {
        std::unique_ptr<char, void (*)(void *)> s(strata_stats_json(db_.get()), strata_free);
        return s ? std::string(s.get()) : std::string();
    }
    void close() {
        char *err = nullptr;
        check(strata_close(db_.get(), &err), err);
    }

  private:
    Handle<strata_t, strata_destroy> db_;
};

} // namespace strata

static int failures = 0;
#define CHECK(cond)                                                                      \
    do {                                                                                 \
        if (!(cond)) {                                                                   \
            std::fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
            failures++;                                                                  \
        }                                                                                \
    } while (0)

int main(int argc, char **argv) {
    if (argc != 2) {
        std::fprintf(stderr, "usage: %s DIR\n", argv[0]);
        return 2;
    }
    try {
        strata::Db db(argv[1], "write_buffer_size=1M");
        db.put("apple", "red");
        db.put(std::string_view("nul\0key", 7), std::string_view("v\0v", 3), true);
        CHECK(db.get("apple") == std::optional<std::string>("red"));
        CHECK(db.get(std::string_view("nul\0key", 7)) == std::optional<std::string>(std::string("v\0v", 3)));
        CHECK(!db.get("pear").has_value());
        {
            auto snap = db.snapshot();
            strata::Batch b;
            b.put("banana", "yellow").put("cherry", "dark red").del("apple");
            CHECK(b.size() == 3);
            db.write(b, true);
            CHECK(!db.get("apple").has_value());
            CHECK(db.get("apple", &snap) == std::optional<std::string>("red"));
            std::vector<std::string> keys;
            auto it = db.iter(&snap); // destroyed before the snapshot
            for (it.seek_to_first(); it.valid(); it.next()) keys.emplace_back(it.key());
            it.status();
            CHECK(keys.size() == 2 && keys[0] == "apple");
        }
        auto it = db.iter();
        std::vector<std::string> rev;
        for (it.seek_to_last(); it.valid(); it.prev()) rev.emplace_back(it.key());
        CHECK(rev.size() == 3 && rev[0] == "nul" + std::string(1, '\0') + "key" && rev[2] == "banana");
        it.seek("c");
        CHECK(it.valid() && it.key() == "cherry" && it.value() == "dark red");
        CHECK(db.stats_json().find("\"user_writes\"") != std::string::npos);
        db.close();
        bool threw = false;
        try {
            db.put("k", "v");
        } catch (const strata::Error &e) {
            threw = e.code() == STRATA_ECLOSED;
        }
        CHECK(threw);
    } catch (const std::exception &e) {
        std::fprintf(stderr, "unexpected exception: %s\n", e.what());
        return 1;
    }
    if (failures == 0) std::printf("raii.cpp: all checks passed\n");
    return failures == 0 ? 0 : 1;
}
