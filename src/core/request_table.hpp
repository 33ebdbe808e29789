// Handles of persistent requests. A handle is an id, never an address and never reused, so a
// freed or copied-then-freed handle is always recognised instead of dereferenced.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "core/request_engine.hpp"
#include "dct/dct.h"

namespace dct::detail {

struct PersistentRequest {
  std::unique_ptr<RequestEngine> engine;
  const void *sendbuf = nullptr;
  void *recvbuf = nullptr;
  int backwards_made = 0;  ///< DCT-MP forward: backward requests paired with it (their names)
};

class RequestTable {
 public:
  static RequestTable &instance();

  DCT_Request insert(std::unique_ptr<PersistentRequest> request);
  /// Throws DCT_ERR_ARG for a NULL pointer, DCT_ERR_REQUEST for a null or unknown handle.
  PersistentRequest &find(const DCT_Request *handle);
  /// The communicator context `handle` works on (kept alive by the caller's copy), for the
  /// call to enter it before it finds the request again; throws as find.
  std::shared_ptr<CommContext> context_of(const DCT_Request *handle);
  /// Throws as find, and DCT_ERR_ACTIVE if the request is started and not completed.
  void erase(DCT_Request handle);
  /// The live requests whose engine works on `context`, in creation order.
  std::vector<PersistentRequest *> on_context(const CommContext *context);

 private:
  std::uintptr_t next_id_ = 1;
  std::map<std::uintptr_t, std::unique_ptr<PersistentRequest>> requests_;  // ordered: ids grow
};

}  // namespace dct::detail
