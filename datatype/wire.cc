// datatype/wire.cc — compact, versioned encoding of a committed layout.
//
//   "ibdt" | format version (1 byte) | header | nodes | root
// Integers are LEB128 varints (signed ones zigzag-encoded). Nodes are listed
// children first, so a node refers to children by a smaller index and the
// graph is acyclic by construction. Shared sub-programs are sent once.
//
// Decoding trusts nothing: every read is bounds-checked, array lengths are
// checked against the bytes left before anything is allocated, and every
// node is re-validated and its size/bounds recomputed with overflow checks.
#include <cstring>
#include <unordered_map>

#include "datatype/type_impl.h"

namespace ibdt::datatype {
namespace {

constexpr uint8_t kMagic[4] = {'i', 'b', 'd', 't'};
constexpr uint8_t kFormatVersion = 1;

class Writer {
 public:
  void u(uint64_t v) {
    do {
      uint8_t byte = v & 0x7f;
      v >>= 7;
      out_.push_back(static_cast<uint8_t>(byte | (v ? 0x80 : 0)));
    } while (v);
  }
  void s(int64_t v) { u((static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63)); }
  void raw(const uint8_t* p, size_t n) { out_.insert(out_.end(), p, p + n); }
  std::vector<uint8_t> take() { return std::move(out_); }

 private:
  std::vector<uint8_t> out_;
};

class Reader {
 public:
  explicit Reader(std::span<const uint8_t> in) : in_(in) {}
  size_t left() const { return in_.size() - at_; }
  bool u(uint64_t& v) {
    v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (at_ >= in_.size()) return false;
      const uint8_t byte = in_[at_++];
      if (shift == 63 && byte > 1) return false;  // more than 64 bits
      v |= static_cast<uint64_t>(byte & 0x7f) << shift;
      if (!(byte & 0x80)) return true;
    }
    return false;
  }
  bool s(int64_t& v) {
    uint64_t z = 0;
    if (!u(z)) return false;
    v = static_cast<int64_t>(z >> 1) ^ -static_cast<int64_t>(z & 1);
    return true;
  }
  // A non-negative value that fits int64_t.
  bool n(int64_t& v) {
    uint64_t x = 0;
    if (!u(x) || x > static_cast<uint64_t>(INT64_MAX)) return false;
    v = static_cast<int64_t>(x);
    return true;
  }
  bool raw(uint8_t* p, size_t n) {
    if (left() < n) return false;
    std::memcpy(p, in_.data() + at_, n);
    at_ += n;
    return true;
  }

 private:
  std::span<const uint8_t> in_;
  size_t at_ = 0;
};

void collect(const NodePtr& node, std::unordered_map<const Node*, uint64_t>& index, std::vector<const Node*>& order) {
  if (index.count(node.get())) return;
  for (const NodePtr& c : node->children) collect(c, index, order);
  index.emplace(node.get(), order.size());
  order.push_back(node.get());
}

Status bad(const char* what) { return makeError(Code::kProtocol, "datatype wire format: ", what); }

}  // namespace

Result<std::vector<uint8_t>> serialize(const Datatype& type) {
  IBDT_RETURN_IF_ERROR(checkHandle(type, "serialize", true));
  const TypeImpl& t = *type.impl();
  const NodeRef& root = t.program;
  std::unordered_map<const Node*, uint64_t> index;
  std::vector<const Node*> order;
  if (!root.empty()) collect(root.node, index, order);

  Writer w;
  w.raw(kMagic, sizeof(kMagic));
  w.u(kFormatVersion);
  w.u(static_cast<uint64_t>(t.size));
  w.s(t.lb);
  w.s(t.ub);
  w.u(t.signature.hash);
  w.u(static_cast<uint64_t>(t.signature.elements));
  w.u(static_cast<uint64_t>(t.homogeneous));
  w.u(t.id);
  w.u(t.version);
  w.u(order.size());
  for (const Node* n : order) {
    w.u(static_cast<uint64_t>(n->kind));
    w.u(static_cast<uint64_t>(n->count));
    switch (n->kind) {
      case NodeKind::kRunVector:
        w.u(static_cast<uint64_t>(n->runBytes));
        w.s(n->stride);
        break;
      case NodeKind::kRunBlockIndexed:
        w.u(static_cast<uint64_t>(n->runBytes));
        for (int64_t d : n->displs) w.s(d);
        break;
      case NodeKind::kRunIndexed:
        for (size_t i = 0; i < n->displs.size(); ++i) {
          w.s(n->displs[i]);
          w.u(static_cast<uint64_t>(n->lengths[i]));
        }
        break;
      case NodeKind::kVector:
        w.u(index.at(n->children[0].get()));
        w.s(n->stride);
        break;
      case NodeKind::kBlockIndexed:
        w.u(index.at(n->children[0].get()));
        for (int64_t d : n->displs) w.s(d);
        break;
      case NodeKind::kStruct:
        for (size_t i = 0; i < n->displs.size(); ++i) {
          w.u(index.at(n->children[i].get()));
          w.s(n->displs[i]);
        }
        break;
    }
  }
  w.u(root.empty() ? 0 : index.at(root.node.get()) + 1);
  w.s(root.shift);
  return w.take();
}

Result<Datatype> deserialize(std::span<const uint8_t> bytes) {
  Reader r(bytes);
  uint8_t magic[4];
  if (!r.raw(magic, 4) || std::memcmp(magic, kMagic, 4) != 0) return bad("bad magic");
  uint64_t version = 0;
  if (!r.u(version)) return bad("truncated header");
  if (version != kFormatVersion) {
    return makeError(Code::kProtocol, "datatype wire format: version ", version, ", this build reads ",
                     int{kFormatVersion});
  }
  int64_t size = 0, lb = 0, ub = 0, elements = 0, homogeneous = 0, nodeCount = 0;
  uint64_t hash = 0, id = 0, typeVersion = 0;
  if (!r.n(size) || !r.s(lb) || !r.s(ub) || !r.u(hash) || !r.n(elements) || !r.n(homogeneous) || !r.u(id) ||
      !r.u(typeVersion) || !r.n(nodeCount)) {
    return bad("truncated header");
  }
  if (homogeneous > kBasicKindCount) return bad("unknown basic type");
  if (lb > ub) return bad("lower bound above upper bound");
  if (static_cast<uint64_t>(nodeCount) > r.left() / 2) return bad("more nodes than bytes");
  if (homogeneous != 0) {
    int64_t expect = 0;
    if (__builtin_mul_overflow(elements, basicSize(static_cast<BasicKind>(homogeneous)), &expect) || expect != size) {
      return bad("signature does not match the size");
    }
  }

  std::vector<NodePtr> nodes;
  auto childAt = [&](NodePtr& out) {
    uint64_t i = 0;
    if (!r.u(i) || i >= nodes.size()) return false;
    out = nodes[i];
    return true;
  };
  for (int64_t k = 0; k < nodeCount; ++k) {
    Node node;
    uint64_t kind = 0;
    if (!r.u(kind) || !r.n(node.count)) return bad("truncated node");
    if (kind < 1 || kind > static_cast<uint64_t>(NodeKind::kStruct)) return bad("unknown node kind");
    node.kind = static_cast<NodeKind>(kind);
    const bool arrays = node.kind != NodeKind::kRunVector && node.kind != NodeKind::kVector;
    if (arrays && static_cast<uint64_t>(node.count) > r.left()) return bad("array longer than the message");
    const size_t n = static_cast<size_t>(node.count);
    bool ok = true;
    switch (node.kind) {
      case NodeKind::kRunVector:
        ok = r.n(node.runBytes) && r.s(node.stride);
        break;
      case NodeKind::kRunBlockIndexed:
        ok = r.n(node.runBytes);
        node.displs.resize(n);
        for (size_t i = 0; ok && i < n; ++i) ok = r.s(node.displs[i]);
        break;
      case NodeKind::kRunIndexed:
        node.displs.resize(n);
        node.lengths.resize(n);
        for (size_t i = 0; ok && i < n; ++i) ok = r.s(node.displs[i]) && r.n(node.lengths[i]);
        break;
      case NodeKind::kVector:
        node.children.resize(1);
        ok = childAt(node.children[0]) && r.s(node.stride);
        break;
      case NodeKind::kBlockIndexed:
        node.children.resize(1);
        ok = childAt(node.children[0]);
        node.displs.resize(n);
        for (size_t i = 0; ok && i < n; ++i) ok = r.s(node.displs[i]);
        break;
      case NodeKind::kStruct:
        node.children.resize(n);
        node.displs.resize(n);
        for (size_t i = 0; ok && i < n; ++i) ok = childAt(node.children[i]) && r.s(node.displs[i]);
        break;
    }
    if (!ok) return bad("truncated node or bad child reference");
    Status status = finishNode(node);
    if (!status.isOk()) {
      return makeError(Code::kProtocol, "datatype wire format: node ", k, ": ", status.message());
    }
    nodes.push_back(std::make_shared<const Node>(std::move(node)));
  }
  uint64_t rootIndex = 0;
  NodeRef root;
  if (!r.u(rootIndex) || rootIndex > nodes.size() || !r.s(root.shift)) return bad("bad root");
  if (r.left() != 0) return bad("trailing bytes");
  if (rootIndex > 0) root.node = nodes[rootIndex - 1];
  if (root.size() != size) return bad("size does not match the layout");
  if (!root.empty()) {
    int64_t lo = 0, hi = 0;
    if (__builtin_add_overflow(root.shift, root.node->lo, &lo) || __builtin_add_overflow(root.shift, root.node->hi, &hi)) {
      return bad("layout bounds exceed 64 bits");
    }
  }
  int64_t extent = 0;
  if (__builtin_sub_overflow(ub, lb, &extent)) return bad("extent exceeds 64 bits");
  (void)id;
  (void)typeVersion;
  return makeLayoutType(std::move(root), lb, ub, Signature{hash, elements}, static_cast<int>(homogeneous));
}

}  // namespace ibdt::datatype
