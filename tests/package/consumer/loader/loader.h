// The consumer's own loader/loader.h: a trainer's folder named loader/ that
// sits first on its include path. pinwheel's installed headers must not
// pick it up (they include "pinwheel/loader/...").
#ifndef PINWHEEL_CONSUMER_OWN_LOADER_H_
#define PINWHEEL_CONSUMER_OWN_LOADER_H_

namespace consumer {
inline constexpr const char* kOwnLoader = "the consumer's own loader/loader.h";
}  // namespace consumer

#endif  // PINWHEEL_CONSUMER_OWN_LOADER_H_
