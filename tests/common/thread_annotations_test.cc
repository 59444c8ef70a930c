#include "common/thread_annotations.h"

#include <chrono>
#include <condition_variable>
#include <thread>

#include <gtest/gtest.h>

namespace spmdsim {
namespace {

class Flag {
 public:
  void Set() SPMDSIM_EXCLUDES(mu_) {
    {
      MutexLock lock(mu_);
      set_ = true;
    }
    cv_.notify_all();
  }
  bool WaitFor(std::chrono::milliseconds timeout) SPMDSIM_EXCLUDES(mu_) {
    MutexLock lock(mu_);
    return lock.WaitFor(cv_, timeout, [this]() SPMDSIM_REQUIRES(mu_) { return set_; });
  }
  bool IsSetAfterRelock() SPMDSIM_EXCLUDES(mu_) {
    MutexLock lock(mu_);
    lock.Unlock();
    lock.Lock();
    return set_;
  }
  Mutex& mu() { return mu_; }

 private:
  Mutex mu_;
  std::condition_variable cv_;
  bool set_ SPMDSIM_GUARDED_BY(mu_) = false;
};

TEST(MutexLock, WaitReturnsOnceAnotherThreadSetsTheCondition) {
  Flag flag;
  std::thread setter([&] { flag.Set(); });
  EXPECT_TRUE(flag.WaitFor(std::chrono::seconds(30)));
  setter.join();
  EXPECT_TRUE(flag.IsSetAfterRelock());
}

TEST(MutexLock, WaitForTimesOutWithTheLockHeldAgain) {
  Flag flag;
  EXPECT_FALSE(flag.WaitFor(std::chrono::milliseconds(1)));
  if (flag.mu().TryLock()) {  // the wait's lock was released at scope exit
    flag.mu().Unlock();
  } else {
    ADD_FAILURE() << "the Mutex is still held";
  }
}

TEST(MutexLock, AdoptsALockTakenWithTryLock) {
  Mutex mu;
  if (!mu.TryLock()) {
    ADD_FAILURE() << "a fresh Mutex is held";
    return;
  }
  {
    MutexLock lock(mu, std::adopt_lock);
    std::thread other([&] {
      if (mu.TryLock()) {
        ADD_FAILURE() << "the adopted lock is not held";
        mu.Unlock();
      }
    });
    other.join();
  }
  MutexLock again(mu);  // released by the adopting MutexLock
}

TEST(SharedMutex, ReadersShareWritersExclude) {
  SharedMutex mu;
  {
    ReaderMutexLock a(mu);
    std::thread other([&] { ReaderMutexLock b(mu); });  // would wait for ever if readers excluded each other
    other.join();
  }
  WriterMutexLock w(mu);
}

}  // namespace
}  // namespace spmdsim
