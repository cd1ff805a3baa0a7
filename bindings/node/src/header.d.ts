// header placeholder
