#ifndef SPMDSIM_COMMON_THREAD_ANNOTATIONS_H_
#define SPMDSIM_COMMON_THREAD_ANNOTATIONS_H_

// Lock contracts the compiler checks (Abseil's absl/base/thread_annotations.h style), and the annotated mutexes
// they need: libstdc++'s std::mutex is not a capability, so clang's -Wthread-safety (the `clang` preset) can only
// follow locks taken through spmdsim::Mutex / SharedMutex and their scoped guards. Under other compilers every
// macro expands to nothing.
//
// Example:
//   class Counter {
//    public:
//     void Add(int n) SPMDSIM_EXCLUDES(mu_) { MutexLock lock(mu_); total_ += n; }
//    private:
//     void AddLocked(int n) SPMDSIM_REQUIRES(mu_) { total_ += n; }
//     Mutex mu_;
//     int total_ SPMDSIM_GUARDED_BY(mu_) = 0;
//   };
//
// Condition variables: a std::condition_variable waits through MutexLock::Wait/WaitFor/WaitUntil, which hand
// the underlying std::mutex to the wait and hold the capability again when they return. A predicate that reads
// guarded fields is a lambda annotated `[&]() SPMDSIM_REQUIRES(mu_) { ... }`.
//
// Thread safety: Mutex and SharedMutex are as thread-safe as the std:: types they wrap; a MutexLock belongs to
// the thread that made it. Memory ordering is std::mutex's: what a thread wrote before Unlock is visible to the
// thread that Locks next.

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <shared_mutex>

#if defined(__clang__)
#define SPMDSIM_THREAD_ANNOTATION_(x) __attribute__((x))
#else
#define SPMDSIM_THREAD_ANNOTATION_(x)
#endif

// A type that is a lock ("mutex").
#define SPMDSIM_CAPABILITY(x) SPMDSIM_THREAD_ANNOTATION_(capability(x))
// An RAII type that holds a capability for its lifetime.
#define SPMDSIM_SCOPED_CAPABILITY SPMDSIM_THREAD_ANNOTATION_(scoped_lockable)
// The field is read and written only with `x` held.
#define SPMDSIM_GUARDED_BY(x) SPMDSIM_THREAD_ANNOTATION_(guarded_by(x))
// The data the pointer field points to is read and written only with `x` held.
#define SPMDSIM_PT_GUARDED_BY(x) SPMDSIM_THREAD_ANNOTATION_(pt_guarded_by(x))
// The caller must hold the capabilities (exclusively / at least shared).
#define SPMDSIM_REQUIRES(...) SPMDSIM_THREAD_ANNOTATION_(requires_capability(__VA_ARGS__))
#define SPMDSIM_REQUIRES_SHARED(...) SPMDSIM_THREAD_ANNOTATION_(requires_shared_capability(__VA_ARGS__))
// The caller must not hold the capabilities (the function takes them).
#define SPMDSIM_EXCLUDES(...) SPMDSIM_THREAD_ANNOTATION_(locks_excluded(__VA_ARGS__))
// The function takes / gives back the capabilities (no argument: `this`).
#define SPMDSIM_ACQUIRE(...) SPMDSIM_THREAD_ANNOTATION_(acquire_capability(__VA_ARGS__))
#define SPMDSIM_ACQUIRE_SHARED(...) SPMDSIM_THREAD_ANNOTATION_(acquire_shared_capability(__VA_ARGS__))
#define SPMDSIM_RELEASE(...) SPMDSIM_THREAD_ANNOTATION_(release_capability(__VA_ARGS__))
#define SPMDSIM_RELEASE_SHARED(...) SPMDSIM_THREAD_ANNOTATION_(release_shared_capability(__VA_ARGS__))
#define SPMDSIM_RELEASE_GENERIC(...) SPMDSIM_THREAD_ANNOTATION_(release_generic_capability(__VA_ARGS__))
// The function takes the capability when it returns `b`.
#define SPMDSIM_TRY_ACQUIRE(...) SPMDSIM_THREAD_ANNOTATION_(try_acquire_capability(__VA_ARGS__))
// Tells the analysis (without checking at run time) that the capability is held.
#define SPMDSIM_ASSERT_CAPABILITY(x) SPMDSIM_THREAD_ANNOTATION_(assert_capability(x))
#define SPMDSIM_ASSERT_SHARED_CAPABILITY(x) SPMDSIM_THREAD_ANNOTATION_(assert_shared_capability(x))
// Turns the analysis off for one function (say why next to it).
#define SPMDSIM_NO_THREAD_SAFETY_ANALYSIS SPMDSIM_THREAD_ANNOTATION_(no_thread_safety_analysis)

namespace spmdsim {

// std::mutex as a capability.
class SPMDSIM_CAPABILITY("mutex") Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void Lock() SPMDSIM_ACQUIRE() { mu_.lock(); }
  void Unlock() SPMDSIM_RELEASE() { mu_.unlock(); }
  bool TryLock() SPMDSIM_TRY_ACQUIRE(true) { return mu_.try_lock(); }

 private:
  friend class MutexLock;
  std::mutex mu_;
};

// Holds a Mutex from construction to destruction; Unlock/Lock let go of it and take it again in between.
class SPMDSIM_SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(Mutex& mu) SPMDSIM_ACQUIRE(mu) : mu_(mu) { mu_.Lock(); }
  // Takes over a Mutex the caller has locked (e.g. with TryLock).
  MutexLock(Mutex& mu, std::adopt_lock_t) SPMDSIM_REQUIRES(mu) : mu_(mu) {}
  ~MutexLock() SPMDSIM_RELEASE() {
    if (held_) mu_.Unlock();
  }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

  void Unlock() SPMDSIM_RELEASE() {
    mu_.Unlock();
    held_ = false;
  }
  void Lock() SPMDSIM_ACQUIRE() {
    mu_.Lock();
    held_ = true;
  }

  // std::condition_variable waits; the Mutex is held again when they return. REQUIRES: the lock is held.
  template <typename Predicate>
  void Wait(std::condition_variable& cv, Predicate done) {
    std::unique_lock<std::mutex> lock(mu_.mu_, std::adopt_lock);
    cv.wait(lock, std::move(done));
    lock.release();
  }
  template <typename Rep, typename Period>
  void WaitFor(std::condition_variable& cv, std::chrono::duration<Rep, Period> timeout) {
    std::unique_lock<std::mutex> lock(mu_.mu_, std::adopt_lock);
    cv.wait_for(lock, timeout);
    lock.release();
  }
  // Returns done() (false: the time ran out first).
  template <typename Rep, typename Period, typename Predicate>
  bool WaitFor(std::condition_variable& cv, std::chrono::duration<Rep, Period> timeout, Predicate done) {
    std::unique_lock<std::mutex> lock(mu_.mu_, std::adopt_lock);
    const bool result = cv.wait_for(lock, timeout, std::move(done));
    lock.release();
    return result;
  }
  template <typename Clock, typename Duration, typename Predicate>
  bool WaitUntil(std::condition_variable& cv, std::chrono::time_point<Clock, Duration> deadline, Predicate done) {
    std::unique_lock<std::mutex> lock(mu_.mu_, std::adopt_lock);
    const bool result = cv.wait_until(lock, deadline, std::move(done));
    lock.release();
    return result;
  }

 private:
  Mutex& mu_;
  bool held_ = true;
};

// std::shared_mutex as a capability: one writer or many readers.
class SPMDSIM_CAPABILITY("mutex") SharedMutex {
 public:
  SharedMutex() = default;
  SharedMutex(const SharedMutex&) = delete;
  SharedMutex& operator=(const SharedMutex&) = delete;

  void Lock() SPMDSIM_ACQUIRE() { mu_.lock(); }
  void Unlock() SPMDSIM_RELEASE() { mu_.unlock(); }
  void ReaderLock() SPMDSIM_ACQUIRE_SHARED() { mu_.lock_shared(); }
  void ReaderUnlock() SPMDSIM_RELEASE_SHARED() { mu_.unlock_shared(); }
  // For a function the analysis cannot see is called under the lock (e.g. a public member whose lock is
  // private to one .cc file). Checks nothing at run time.
  void AssertReaderHeld() const SPMDSIM_ASSERT_SHARED_CAPABILITY(this) {}

 private:
  std::shared_mutex mu_;
};

// Holds a SharedMutex exclusively from construction to destruction.
class SPMDSIM_SCOPED_CAPABILITY WriterMutexLock {
 public:
  explicit WriterMutexLock(SharedMutex& mu) SPMDSIM_ACQUIRE(mu) : mu_(mu) { mu_.Lock(); }
  ~WriterMutexLock() SPMDSIM_RELEASE() { mu_.Unlock(); }
  WriterMutexLock(const WriterMutexLock&) = delete;
  WriterMutexLock& operator=(const WriterMutexLock&) = delete;

 private:
  SharedMutex& mu_;
};

// Holds a SharedMutex shared from construction to destruction.
class SPMDSIM_SCOPED_CAPABILITY ReaderMutexLock {
 public:
  explicit ReaderMutexLock(SharedMutex& mu) SPMDSIM_ACQUIRE_SHARED(mu) : mu_(mu) { mu_.ReaderLock(); }
  ~ReaderMutexLock() SPMDSIM_RELEASE() { mu_.ReaderUnlock(); }
  ReaderMutexLock(const ReaderMutexLock&) = delete;
  ReaderMutexLock& operator=(const ReaderMutexLock&) = delete;

 private:
  SharedMutex& mu_;
};

}  // namespace spmdsim

#endif  // SPMDSIM_COMMON_THREAD_ANNOTATIONS_H_
