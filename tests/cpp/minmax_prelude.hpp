/* What a program that includes <windows.h> without NOMINMAX has seen by
 * the time it includes the facade: the standard headers, then min and max
 * as function-like macros (tests/cpp/strict.sh compiles the consumer with
 * this file first). */
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <limits>
#include <memory>
#include <new>
#include <optional>
#include <ratio>
#include <string>
#include <system_error>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#define min(a, b) ((a) < (b) ? (a) : (b))
#define max(a, b) ((a) > (b) ? (a) : (b))
