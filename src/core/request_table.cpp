#include "core/request_table.hpp"

#include <mutex>

#include "core/comm_context.hpp"
#include "core/error.hpp"

namespace dct::detail {

RequestTable &RequestTable::instance() {
  static RequestTable table;
  return table;
}

DCT_Request RequestTable::insert(std::unique_ptr<PersistentRequest> request) {
  std::lock_guard<std::recursive_mutex> lock(library_mutex());
  const std::uintptr_t id = next_id_++;
  requests_.emplace(id, std::move(request));
  return reinterpret_cast<DCT_Request>(id);
}

PersistentRequest &RequestTable::find(const DCT_Request *handle) {
  require(handle != nullptr, DCT_ERR_ARG, "request pointer is NULL");
  require(*handle != DCT_REQUEST_NULL, DCT_ERR_REQUEST, "request is DCT_REQUEST_NULL");
  std::lock_guard<std::recursive_mutex> lock(library_mutex());
  auto found = requests_.find(reinterpret_cast<std::uintptr_t>(*handle));
  require(found != requests_.end(), DCT_ERR_REQUEST, "request was freed or never created");
  return *found->second;
}

std::shared_ptr<CommContext> RequestTable::context_of(const DCT_Request *handle) {
  std::lock_guard<std::recursive_mutex> lock(library_mutex());
  return find(handle).engine->shared_context();
}

void RequestTable::erase(DCT_Request handle) {
  PersistentRequest &request = find(&handle);
  require(!request.engine->active(), DCT_ERR_ACTIVE,
          "request is started: complete it with DCT_Wait before freeing it");
  std::lock_guard<std::recursive_mutex> lock(library_mutex());
  requests_.erase(reinterpret_cast<std::uintptr_t>(handle));
}

}  // namespace dct::detail

namespace dct::detail {

std::vector<PersistentRequest *> RequestTable::on_context(const CommContext *context) {
  std::lock_guard<std::recursive_mutex> lock(library_mutex());
  std::vector<PersistentRequest *> found;
  for (auto &[id, request] : requests_)
    if (request->engine->context() == context) found.push_back(request.get());
  return found;
}

}  // namespace dct::detail
