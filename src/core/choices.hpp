// The names of an enum knob's values, written once: the one table both the parser (name to
// value) and the `*_name` function (value to name) read, so that the two cannot drift apart.
#pragma once

#include <cstddef>
#include <string>

namespace dct::detail {

/// One name of an enum knob's value. `settable` false: a name the value is shown with but that
/// no setting takes (DCT_ALGORITHM_PASSTHROUGH is an outcome, not a choice).
template <typename E>
struct Spelling {
  const char *name;
  E value;
  bool settable = true;
};

/// How a refusal lists the names taken: "one of a, b, c", or "a, b or c".
enum class Listing { one_of, or_last };

/// An enum knob's names (a table of Spelling<E>, in the order a refusal lists them).
template <typename E>
class Choices {
 public:
  template <std::size_t N>
  constexpr Choices(const Spelling<E> (&names)[N], Listing listing, const char *unnamed = "unknown")
      : names_(names), count_(N), listing_(listing), unnamed_(unnamed) {}

  /// The name of `value`, or `unnamed` for a value the table lacks. V: E, or an int where the
  /// C ABI passes one (DCT_Algorithm_name).
  template <typename V>
  const char *name(V value) const {
    for (std::size_t i = 0; i < count_; ++i)
      if (names_[i].value == value) return names_[i].name;
    return unnamed_;
  }

  /// The value a setting spelt `text` takes; false when no settable name is `text`.
  bool find(const std::string &text, E &value) const {
    for (std::size_t i = 0; i < count_; ++i)
      if (names_[i].settable && text == names_[i].name) {
        value = names_[i].value;
        return true;
      }
    return false;
  }

  /// The settable names as a refusal lists them.
  std::string listed() const {
    std::string list = listing_ == Listing::one_of ? "one of " : "";
    std::size_t left = 0;
    for (std::size_t i = 0; i < count_; ++i) left += names_[i].settable ? 1 : 0;
    for (std::size_t i = 0; i < count_; ++i) {
      if (!names_[i].settable) continue;
      list += names_[i].name;
      --left;
      if (left > 1 || (left == 1 && listing_ == Listing::one_of))
        list += ", ";
      else if (left == 1)
        list += " or ";
    }
    return list;
  }

 private:
  const Spelling<E> *names_;
  std::size_t count_;
  Listing listing_;
  const char *unnamed_;
};

}  // namespace dct::detail
