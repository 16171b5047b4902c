// datatype/type_impl.cc — type bounds, size and signature (MPI rules), the
// handle methods, and the id registry.
#include "datatype/type_impl.h"

#include <algorithm>
#include <mutex>
#include <utility>

#include "base/checked_math.h"

namespace ibdt::datatype {
namespace {

struct Registry {
  std::mutex mutex;
  std::vector<uint32_t> versions;  // by id: last version handed out
  std::vector<uint32_t> freeIds;
};

Registry& registry() {
  static auto* r = new Registry();  // never destroyed: types may outlive static destruction
  return *r;
}

}  // namespace

void acquireId(uint32_t& id, uint32_t& version) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  if (!r.freeIds.empty()) {
    id = r.freeIds.back();
    r.freeIds.pop_back();
  } else {
    id = static_cast<uint32_t>(r.versions.size());
    r.versions.push_back(0);
  }
  version = ++r.versions[id];
}

void releaseId(uint32_t id) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  r.freeIds.push_back(id);
}

TypeImpl::TypeImpl() { acquireId(id, version); }
TypeImpl::~TypeImpl() { releaseId(id); }

Status checkHandle(const Datatype& type, const char* what, bool needCommitted) {
  if (type.freed()) return makeError(Code::kState, what, ": datatype was freed");
  if (!type.valid()) return makeError(Code::kInvalidArgument, what, ": null datatype");
  if (needCommitted && !type.committed()) {
    return makeError(Code::kState, what, ": datatype ", type.id(), " is not committed");
  }
  return Status::ok();
}

Result<Datatype> finishType(std::shared_ptr<TypeImpl> impl, const char* constructor) {
  TypeImpl& t = *impl;
  Checked m;
  for (const Datatype& c : t.children) {
    IBDT_RETURN_IF_ERROR(checkHandle(c, constructor, false));
  }
  if (t.form == Form::kResized) {
    const TypeImpl& c = *t.children[0].impl();
    t.size = c.size;
    t.trueLb = c.trueLb;
    t.trueUb = c.trueUb;
    t.hasBounds = true;
    t.explicitBounds = true;
    t.alignment = c.alignment;
    t.signature = c.signature;
    t.homogeneous = c.homogeneous;
  } else if (t.form != Form::kBasic && t.form != Form::kLayout) {
    bool first = true;
    bool firstData = true;
    bool mixed = false;
    auto visit = [&](int64_t disp, int64_t blen, const TypeImpl& c) {
      if (blen <= 0) return;
      const int64_t last = m.mul(blen - 1, c.extent());
      if (c.hasBounds) {
        const int64_t lo = m.add(disp, c.lb);
        const int64_t hi = m.add(m.add(disp, last), c.ub);
        t.lb = first ? lo : std::min(t.lb, lo);
        t.ub = first ? hi : std::max(t.ub, hi);
        first = false;
      }
      if (c.size > 0) {
        const int64_t lo = m.add(disp, c.trueLb);
        const int64_t hi = m.add(m.add(disp, last), c.trueUb);
        t.trueLb = firstData ? lo : std::min(t.trueLb, lo);
        t.trueUb = firstData ? hi : std::max(t.trueUb, hi);
        if (firstData) t.homogeneous = c.homogeneous;
        if (t.homogeneous != c.homogeneous) mixed = true;
        firstData = false;
      }
    };
    if (t.form == Form::kVector) {
      const TypeImpl& c = *t.children[0].impl();
      if (t.count > 0) {
        visit(0, t.blocklen, c);
        visit(m.mul(t.count - 1, t.stride), t.blocklen, c);
      }
      t.size = m.mul(m.mul(t.count, t.blocklen), c.size);
      t.signature = sigRepeat(sigRepeat(c.signature, t.blocklen), t.count);
    } else {
      for (size_t i = 0; i < t.displs.size(); ++i) {
        const TypeImpl& c = *t.child(i).impl();
        const int64_t blen = t.blockLength(i);
        visit(t.displs[i], blen, c);
        t.size = m.add(t.size, m.mul(blen, c.size));
        t.signature = sigConcat(t.signature, sigRepeat(c.signature, blen));
      }
    }
    if (mixed) t.homogeneous = 0;
    t.hasBounds = !first;
    for (const Datatype& c : t.children) {
      t.explicitBounds = t.explicitBounds || c.impl()->explicitBounds;
      t.alignment = std::max(t.alignment, c.impl()->alignment);
    }
    if (t.form == Form::kStruct && t.hasBounds && !t.explicitBounds) {
      const int64_t extent = m.sub(t.ub, t.lb);
      t.ub = m.add(t.ub, (t.alignment - extent % t.alignment) % t.alignment);
    }
  }
  m.sub(t.ub, t.lb);
  m.sub(t.trueUb, t.trueLb);
  if (m.overflow) {
    return makeError(Code::kOverflow, constructor, ": size, extent or displacement exceeds 64 bits");
  }
  return Datatype(std::shared_ptr<const TypeImpl>(std::move(impl)));
}

// --- handle methods ---

Status Datatype::commit() {
  IBDT_RETURN_IF_ERROR(checkHandle(*this, "commit", false));
  const NodeRef& program = programOf(*impl_);
  (void)program;
  return impl_->compileStatus;
}

void Datatype::free() {
  impl_.reset();
  freed_ = true;
}

bool Datatype::committed() const { return impl_ && impl_->committed.load(std::memory_order_acquire); }
int64_t Datatype::size() const { return impl_ ? impl_->size : 0; }
int64_t Datatype::lb() const { return impl_ ? impl_->lb : 0; }
int64_t Datatype::ub() const { return impl_ ? impl_->ub : 0; }
int64_t Datatype::extent() const { return impl_ ? impl_->extent() : 0; }
int64_t Datatype::trueLb() const { return impl_ ? impl_->trueLb : 0; }
int64_t Datatype::trueUb() const { return impl_ ? impl_->trueUb : 0; }
int64_t Datatype::trueExtent() const { return impl_ ? impl_->trueUb - impl_->trueLb : 0; }
uint32_t Datatype::id() const { return impl_ ? impl_->id : 0; }
uint32_t Datatype::version() const { return impl_ ? impl_->version : 0; }

bool Datatype::contiguous() const {
  if (!committed()) return false;
  const NodeRef& p = impl_->program;
  return p.empty() || (p.node->isSingleRun() && impl_->extent() == impl_->size);
}

Datatype makeLayoutType(NodeRef program, int64_t lb, int64_t ub, Signature signature, int homogeneous) {
  auto impl = std::make_shared<TypeImpl>();
  impl->form = Form::kLayout;
  impl->size = program.size();
  impl->lb = lb;
  impl->ub = ub;
  impl->hasBounds = true;
  impl->explicitBounds = true;
  if (!program.empty()) {
    impl->trueLb = program.shift + program.node->lo;
    impl->trueUb = program.shift + program.node->hi;
  }
  impl->signature = signature;
  impl->homogeneous = homogeneous;
  impl->program = std::move(program);
  std::call_once(impl->compileOnce, [] {});
  impl->committed.store(true, std::memory_order_release);
  return Datatype(std::shared_ptr<const TypeImpl>(std::move(impl)));
}

}  // namespace ibdt::datatype
