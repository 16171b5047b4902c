// A communicator's alltoall plans by their arguments (see the header).
#include "mpi/alltoall_cache.h"

#include <utility>

namespace ibdt::mpi {

const AlltoallCache::PlanPtr* AlltoallCache::find(const Key& key) {
  for (Entry& entry : entries_) {
    if (entry.key == key && entry.plan->valid() && !held(entry)) {
      entry.lastUse = ++clock_;
      return &entry.plan;
    }
  }
  return nullptr;
}

const AlltoallCache::PlanPtr& AlltoallCache::insert(const Key& key, collectives::Plan plan) {
  if (entries_.size() >= capacity_) {
    auto oldest = entries_.end();
    for (auto it = entries_.begin(); it != entries_.end(); ++it) {
      if (!held(*it) && (oldest == entries_.end() || it->lastUse < oldest->lastUse)) oldest = it;
    }
    if (oldest != entries_.end()) {  // else every plan is in flight: keep them all
      if (oldest->plan.get() == last_.plan) last_ = {};
      entries_.erase(oldest);
    }
  }
  entries_.push_back(Entry{key, std::make_shared<collectives::Plan>(std::move(plan)), ++clock_});
  return entries_.back().plan;
}

AlltoallCache::Key alltoallKey(const AlltoallArgs& args, const datatype::Datatype& send,
                               const datatype::Datatype& recv, int32_t tag) {
  return {args.sendbuf, args.sendcount, send.id(), send.version(), args.recvbuf, args.recvcount,
          recv.id(),    recv.version(),  tag};
}

}  // namespace ibdt::mpi
