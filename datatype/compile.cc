// datatype/compile.cc — commit: turns a type description into its loop
// program. Each block of `blen` x child becomes a repeat of the child's
// program at the child's extent; the builders merge and fuse as they go.
#include <map>
#include <unordered_map>

#include "datatype/type_impl.h"

namespace ibdt::datatype {
namespace {

class Compiler {
 public:
  Result<NodeRef> compile(const TypeImpl& t) {
    if (t.committed.load(std::memory_order_acquire)) return t.program;
    auto it = done_.find(&t);
    if (it != done_.end()) return it->second;
    IBDT_ASSIGN_OR_RETURN(NodeRef ref, compileForm(t));
    done_.emplace(&t, ref);
    return ref;
  }

 private:
  Result<NodeRef> block(int64_t blen, const TypeImpl& child) {
    IBDT_ASSIGN_OR_RETURN(NodeRef c, compile(child));
    return makeRepeat(blen, child.extent(), c);
  }

  Result<NodeRef> compileForm(const TypeImpl& t) {
    switch (t.form) {
      case Form::kBasic:
      case Form::kLayout:
        return t.program;
      case Form::kResized:
        return compile(*t.children[0].impl());
      case Form::kVector: {
        IBDT_ASSIGN_OR_RETURN(NodeRef b, block(t.blocklen, *t.children[0].impl()));
        return makeRepeat(t.count, t.stride, b);
      }
      case Form::kIndexed:
      case Form::kStruct: {
        std::vector<NodeRef> blocks(t.displs.size());
        std::map<std::pair<const TypeImpl*, int64_t>, NodeRef> memo;  // equal blocks share one node
        for (size_t i = 0; i < blocks.size(); ++i) {
          const TypeImpl* c = t.child(i).impl();
          const auto key = std::make_pair(c, t.blockLength(i));
          auto it = memo.find(key);
          if (it == memo.end()) {
            IBDT_ASSIGN_OR_RETURN(NodeRef b, block(key.second, *c));
            it = memo.emplace(key, b).first;
          }
          blocks[i] = it->second;
        }
        return makeBlocks(blocks, t.displs);
      }
    }
    return makeError(Code::kInternal, "compile: unknown form");
  }

  std::unordered_map<const TypeImpl*, NodeRef> done_;
};

}  // namespace

const NodeRef& programOf(const TypeImpl& impl) {
  std::call_once(impl.compileOnce, [&impl] {
    Compiler compiler;
    Result<NodeRef> program = compiler.compile(impl);
    if (!program.isOk()) {
      impl.compileStatus = program.status();
      impl.compileStatus.withContext("commit");
      return;
    }
    impl.program = std::move(program).value();
    impl.committed.store(true, std::memory_order_release);
  });
  return impl.program;
}

}  // namespace ibdt::datatype
